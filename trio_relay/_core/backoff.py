"""Redial delays: immediate after a healthy link, quick retries, then a jittered ladder.

The policy, and why:

- **A healthy link that drops is redialled at once** (``first_delay``, default 0). A
  link counts as healthy when it completed its handshake and served for at least
  ``stable_after`` seconds (default 5): most drops of such a link are transient (a
  connector deploy, a load balancer cutting an idle flow), and waiting helps nobody.
  The replaced design kept its ladder for 60 s, so a second drop ten seconds after a
  first cost the caller 0.5 to 1 s for no reason.
- **Refused dials after a healthy link retry quickly**: about 50, 100, 200 and 400 ms
  (`QUICK_RETRIES`, each jittered, none slower than the ladder), then the ladder.
  A restarted connector is back within a second or two; these find it within ~100 ms
  of its return, and the jitter keeps a herd of gateways from arriving in lockstep.
- **Everything else climbs the ladder**: each wait uniform in ``[d/2, d]``, ``d``
  doubling from ``initial`` up to ``maximum`` (the contract's 1 → 30 s). A link that
  dies young (before ``stable_after``) is flapping: it climbs, it does not reset, so a
  connector that accepts and then drops us is not hammered. The very first dial's
  failures climb it too: with no healthy link behind us there is nothing to rush back to.
- **An HTTP answer that asks us to wait** (408, 429, 5xx at the upgrade) takes the
  ladder's delay, or its ``Retry-After`` if that is longer, never more than ``maximum``.

Sans-I/O: the random source comes in as an argument (one shared ``random.Random``).
"""

from __future__ import annotations

import random

QUICK_RETRIES = (0.05, 0.1, 0.2, 0.4)
"""Ceilings of the quick retries after a healthy link; each wait is uniform in [d/2, d]."""


SHARED_RNG = random.Random()
"""The random source of every relay that was given none: draws from one generator are
as independent as draws from many, and its state (2.5 KiB) is paid once."""


class Backoff:
    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = (
        "_first_delay",
        "_first_pending",
        "_initial",
        "_maximum",
        "_quick",
        "_quick_next",
        "_rng",
        "_rung",
        "stable_after",
    )

    def __init__(
        self,
        *,
        initial: float = 1.0,
        maximum: float = 30.0,
        first_delay: float = 0.0,
        stable_after: float = 5.0,
        quick_retries: tuple[float, ...] = QUICK_RETRIES,
        rng: random.Random | None = None,
    ) -> None:
        values = (initial, maximum, first_delay, stable_after, *quick_retries)
        if not all(0 <= v < float("inf") for v in values) or maximum < initial:
            raise ValueError(
                "backoff needs 0 <= initial <= maximum and finite, non-negative "
                f"first_delay, stable_after and quick retries; got initial={initial}, "
                f"maximum={maximum}, first_delay={first_delay}, stable_after={stable_after}, "
                f"quick_retries={quick_retries}"
            )
        self._initial = initial
        self._maximum = maximum
        self._first_delay = first_delay
        self.stable_after = stable_after
        self._quick = quick_retries
        self._rng = rng or SHARED_RNG
        # A new relay has no healthy link behind it: no immediate redial, no quick
        # retries, the ladder from its first rung.
        self._first_pending = False
        self._quick_next: int | None = None
        self._rung = 0

    @property
    def rung(self) -> int:
        """Ladder rungs climbed since the last healthy link (0: none yet)."""
        return self._rung

    def is_healthy(self, up_for: float | None) -> bool:
        """Whether a link that served ``up_for`` seconds after its handshake (``None``:
        it never completed one) earns the fast path."""
        return up_for is not None and up_for >= self.stable_after

    def healthy_link_ended(self, *, first_redial_taken: bool = False) -> None:
        """Start afresh: the next redial goes out after ``first_delay`` (unless the
        caller times that one itself: ``first_redial_taken``), and refused dials after
        it retry quickly before the ladder."""
        self._first_pending = not first_redial_taken
        self._quick_next = 0
        self._rung = 0

    def next_delay(self, *, refused_dial: bool = False, retry_after: float | None = None) -> float:
        """The wait before the next dial.

        ``refused_dial``: the last attempt never got a WebSocket up (refused, reset,
        unreachable); only such failures take the quick retries. ``retry_after``: the
        server's ``Retry-After`` in seconds; the wait is at least that (capped at
        ``maximum``) and skips the quick retries, since the server asked for patience.
        """
        if self._first_pending:
            self._first_pending = False
            return self._first_delay
        if retry_after is None and refused_dial and self._quick_next is not None:
            index = self._quick_next
            if index < len(self._quick):
                self._quick_next = index + 1
                # Never slower than the ladder's own rung: a relay tuned to redial
                # faster (a soak's 20 ms, or zero backoff) is not slowed down by them.
                ladder = min(self._maximum, self._initial * 2.0**index)
                ceiling = min(self._quick[index], ladder)
                return self._rng.uniform(ceiling / 2, ceiling)
        # Onto the ladder; the quick retries are spent until the next healthy link.
        self._quick_next = None
        rung = self._rung
        self._rung += 1
        # Capped exponent: 2.0 ** 1024 raises OverflowError after a long outage.
        ceiling = min(self._maximum, self._initial * 2.0 ** min(rung, 1000))
        delay = self._rng.uniform(ceiling / 2, ceiling)
        if retry_after is not None and retry_after > delay:
            delay = min(retry_after, self._maximum)
        return delay
