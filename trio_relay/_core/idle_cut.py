"""Idle-cut detection: something between us and the connector (a load balancer, a
reverse proxy) cuts connections that carried nothing for a while, and the pings are too
far apart to keep them busy.

Measured behind nginx with ``proxy_read_timeout 3s`` and the default 10 s pings: every
link died 3 s after its last traffic, the links were younger than
``backoff_stable_after`` so the ladder climbed, and the relay was connected about 12% of
the time, with nothing in the log but "EOF without a close frame" over and over.

The rule, fed each link's end:

- a link counts as *cut* when the peer ended it without a close frame (``1006``: an EOF
  or a reset), after it was up, and it had received nothing for ``silence`` seconds
  before the end, at least `MIN_SILENCE`, and less than the ping interval would
  explain (a ping was not yet due, within `TOLERANCE`; a cut after pings went
  unanswered is a dead peer, not an idle timeout);
- two cut links in a row after the same silence (within `TOLERANCE`) are an idle
  cut: one WARNING names the silence and the remedy, and the effective ping interval
  drops to half that silence (never below `MIN_PING_INTERVAL`) for the rest of
  the relay's life (``adapt=False``: the warning only);
- a link that ends at the learned cut (the one that taught it included) is *explained*:
  the shell does not count it as flapping, so the ladder does not climb for it.

Sans-I/O: numbers in, decisions out; no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

TOLERANCE = 0.15
"""Two silences are "the same" when they differ by at most this fraction of the longer."""
MIN_SILENCE = 1.0
"""Shorter silences before a cut are not idle timeouts anyone configures."""
MIN_PING_INTERVAL = 1.0
"""The adapted ping interval never goes below this."""


def same_silence(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(a, b)


@dataclass(frozen=True, slots=True)
class IdleCutStep:
    """What to do about one link's end."""

    warning: str | None = None
    """Log this at WARNING (an idle cut was just learned)."""
    explained: bool = False
    """The link ended at the learned idle cut: not a flapping link."""


NOTHING = IdleCutStep()


class IdleCut:
    """The rule for one relay: `link_ended` for each link's end;
    `ping_interval` is the interval to ping at from now on."""

    __slots__ = ("_previous", "adapt", "cut_after", "ping_interval")

    def __init__(self, ping_interval: float, *, adapt: bool = True) -> None:
        self.ping_interval = ping_interval
        """The effective ping interval: the configured one until a cut is learned."""
        self.adapt = adapt
        self.cut_after: float | None = None
        """The learned idle cut (seconds of silence), once two links in a row showed it."""
        self._previous: float | None = None
        """The silence before the last link's cut, if the last link was cut."""

    def link_ended(self, *, cut: bool, silence: float) -> IdleCutStep:
        """A link ended; ``cut``: by the peer without a close frame after it was up;
        ``silence``: seconds it had received nothing before the end."""
        previous, self._previous = self._previous, None
        if not cut:
            return NOTHING
        learned = self.cut_after
        if learned is not None and same_silence(silence, learned):
            return IdleCutStep(explained=self.adapt)
        # A ping was due before the cut: pinging more often would not have prevented it.
        if silence < MIN_SILENCE or silence > self.ping_interval * (1 + TOLERANCE):
            return NOTHING
        if previous is None or not same_silence(silence, previous):
            self._previous = silence
            return NOTHING
        cut_after = min(silence, previous)
        interval = max(MIN_PING_INTERVAL, cut_after / 2)
        if interval >= self.ping_interval:
            return NOTHING  # already pinging at least that often: nothing to learn
        self.cut_after = cut_after
        said = (
            "something between us and the connector cuts connections idle for "
            f"~{cut_after:.1f} s; "
        )
        if not self.adapt:
            said += (
                f"pinging stays every {self.ping_interval:g} s (adapt_ping_interval is "
                "off); set ping_interval below it"
            )
            return IdleCutStep(warning=said)
        self.ping_interval = interval
        said += f"pinging every {interval:.1f} s from now on; set ping_interval below it"
        return IdleCutStep(warning=said, explained=True)
