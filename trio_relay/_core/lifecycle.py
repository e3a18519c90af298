"""The relay's life cycle as data: which state follows which event, and what to do
after a link ends.

In the manner of h11's ``_state.py``: the transitions are a table (`TRANSITIONS`),
and `Lifecycle` is the only thing that moves along it. It is told what happened
(a link came up, the link in use was lost, a link or a dial ended) together with what
the relay knows (it is closing, ``go_dormant`` was asked for, the last link was the
one redial after a first 4401 strike) and answers with the next `Step` —
`Redial` after a delay or `Stop` — and the `Change` of state, if
any. The supervisor (``_trio/supervisor.py``) only carries out these answers, so every
rule is a table row in ``tests/core``.

The close-code rules are `classify` (docs/protocol.md,
"Close codes"); the delays are `Backoff`.

A redial hold (``Relay.hold_redial``, docs/protocol.md "Redial hold") is
`RedialHold`, which the lifecycle holds; `RedialWait` is one wait before a
dial, and says when it ends given the hold: the supervisor sleeps what it says.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .backoff import QUICK_RETRIES, Backoff
from .close import EXPIRED_REASON, ConnectionEnd, Verdict, classify
from .state import State


class Event(enum.Enum):
    UP = "up"
    """A link finished its handshake: requests may use it."""
    DROPPED = "dropped"
    """The link in use ended, not on purpose."""
    WENT_DORMANT = "went_dormant"
    """The link in use was closed by ``go_dormant``."""
    FAILED = "failed"
    """A dial failed, or a link ended before its handshake was done."""
    REVOKED = "revoked"
    """The connector refused the fresh token: terminal."""
    CLOSED = "closed"
    """The relay was closed."""


TRANSITIONS: dict[State, dict[Event, State]] = {
    State.CONNECTING: {
        Event.UP: State.CONNECTED,
        Event.FAILED: State.CONNECTING,  # never connected yet: still connecting
        Event.REVOKED: State.REVOKED,
        Event.CLOSED: State.CLOSED,
    },
    State.CONNECTED: {
        Event.DROPPED: State.RECONNECTING,
        Event.WENT_DORMANT: State.DORMANT,
        Event.CLOSED: State.CLOSED,
    },
    State.RECONNECTING: {
        Event.UP: State.CONNECTED,
        Event.FAILED: State.RECONNECTING,
        Event.REVOKED: State.REVOKED,
        Event.CLOSED: State.CLOSED,
    },
    State.DORMANT: {
        Event.UP: State.CONNECTED,
        Event.FAILED: State.RECONNECTING,  # the armed redial failed: an outage now
        Event.REVOKED: State.REVOKED,
        Event.CLOSED: State.CLOSED,
    },
    State.REVOKED: {Event.CLOSED: State.CLOSED},
    State.CLOSED: {},
}
"""``TRANSITIONS[state][event]`` is the next state; an event missing from a row cannot
happen in that state (the lifecycle raises: a bug of ours, not the network's)."""


def reachable(state: State) -> frozenset[State]:
    """Every state the relay can still reach from ``state``, itself included."""
    return _REACHABLE[state]


def _reachable_from(state: State) -> frozenset[State]:
    seen = {state}
    todo = [state]
    while todo:
        for nxt in TRANSITIONS[todo.pop()].values():
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)


_REACHABLE = {state: _reachable_from(state) for state in State}
"""Walked once: every ``wait_state`` asks at each change of state (a redial's
``wait_connected`` among them), and the table never changes."""


@dataclass(frozen=True, slots=True)
class Change:
    """One state change, as ``Relay.state_changes()`` reports it."""

    old: State
    new: State
    cause: str


@dataclass(frozen=True, slots=True)
class Redial:
    """Dial again after ``delay`` seconds. ``note`` says why, for the log (``warn``:
    at WARNING, because it has happened too often or needs a person to look)."""

    delay: float
    note: str
    warn: bool = False


@dataclass(frozen=True, slots=True)
class Stop:
    """Dial no more; the relay is in ``state`` (REVOKED or CLOSED)."""

    state: State
    cause: str


Step = Redial | Stop

AUTH_ADVICE = "the connector refused our credentials: check the gateway id and secret"
"""Said of a 4401 before any descriptor (or HTTP 401/403 at the upgrade)."""

EXPIRED_ADVICE = (
    "the connector says our token expired: check this host's clock against the "
    "connector's, or give UpgradeAuth a longer token_ttl"
)

WARN_AFTER_FAILURES = len(QUICK_RETRIES) + 1
"""Failed attempts in a row logged at INFO before they escalate to WARNING: the first
redial and the quick retries after a healthy link are expected to fail while a
connector restarts, so a deploy does not page anyone."""

WARN_AFTER_AUTH_REFUSALS = 1
"""One credential refusal may be a provisioning race; the second in a row is not."""


DEFAULT_REDIAL_HOLD_MAX = 60.0
"""The longest a redial hold lasts (``RelayConfig.redial_hold_max``): a lost release
must not strand a gateway (the reference gateway caps its hold at 60 s too)."""


class RedialHold:
    """A hold on redialling: while it lasts no dial starts. Pure: times are passed in.

    `hold` starts a hold of its own from ``now``, replacing any earlier one (a
    renewal is the broker saying it is still there); it ends at `release`, at its
    time, or ``cap`` seconds after it started, whichever is first.
    """

    __slots__ = ("cap", "until")  # no __dict__: one per relay

    def __init__(self, cap: float = DEFAULT_REDIAL_HOLD_MAX) -> None:
        self.cap = cap
        self.until: float | None = None
        """When the current hold ends (``None``: released, or never held)."""

    @staticmethod
    def check(seconds: object) -> float:
        """``seconds`` as a hold's length; raises ``ValueError`` unless it is a positive
        number (``inf`` is one: the cap bounds it)."""
        # (NaN fails ``> 0``; a bool is an int, but no length of time.)
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
            return float(seconds)
        raise ValueError(f"a redial hold must be a positive number of seconds, got {seconds!r}")

    def hold(self, seconds: float, now: float) -> float:
        """Hold from ``now`` for ``seconds`` (at most ``cap``); returns how long it will
        last. Raises ``ValueError`` unless ``seconds`` is a positive number."""
        length = min(self.check(seconds), self.cap)
        self.until = now + length
        return length

    def release(self) -> bool:
        """End the hold now; true when one was on."""
        held, self.until = self.until is not None, None
        return held

    def active(self, now: float) -> bool:
        return self.until is not None and now < self.until


class RedialWait:
    """One wait before a dial: until ``dial_at`` (the backoff's choice), unless a hold
    takes it over. A hold that is on at any point of the wait replaces what is left of
    it: the dial starts the moment the hold ends (released, timed out or capped), not
    when the backoff would have said. Pure: times are passed in."""

    __slots__ = ("dial_at", "held")

    def __init__(self, dial_at: float) -> None:
        self.dial_at = dial_at
        self.held = False
        """True once a hold has taken this wait over."""

    def next_wake(self, now: float, hold: RedialHold) -> float | None:
        """When to look again (sleep until then, or until the hold changes); ``None``:
        dial now."""
        if hold.active(now):
            self.held = True
            assert hold.until is not None
            return hold.until
        if self.held or now >= self.dial_at:
            return None
        return self.dial_at


class Lifecycle:
    """Where the relay is in its life, and what it does next. Pure: no I/O, no clock.

    ``strike`` is true while the link being dialled is the one redial after a first
    4401 strike on an established link (its own 4401 is then terminal).
    """

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = (
        "auth_refusals_in_row",
        "backoff",
        "closing",
        "dormant_redial_delay",
        "dormant_requested",
        "failures_in_row",
        "hold",
        "last_end",
        "state",
        "strike",
    )

    def __init__(
        self,
        backoff: Backoff,
        *,
        dormant_redial_delay: float,
        redial_hold_max: float = DEFAULT_REDIAL_HOLD_MAX,
    ) -> None:
        self.state = State.CONNECTING
        self.hold = RedialHold(redial_hold_max)
        """A hold on redialling (``Relay.hold_redial``); see `RedialWait`."""
        self.backoff = backoff
        self.dormant_redial_delay = dormant_redial_delay
        self.closing = False
        self.dormant_requested = False
        self.strike = False
        self.last_end: ConnectionEnd | None = None
        self.failures_in_row = 0
        """Attempts in a row that ended without the link coming up."""
        self.auth_refusals_in_row = 0

    def _fire(self, event: Event, cause: str) -> Change | None:
        new = TRANSITIONS[self.state].get(event)
        if new is None:
            raise RuntimeError(f"lifecycle: no transition from {self.state.value} on {event.value}")
        if new is self.state:
            return None
        old, self.state = self.state, new
        return Change(old, new, cause)

    # --- what the relay tells it -----------------------------------------------------

    def link_up(self, cause: str) -> Change | None:
        self.failures_in_row = 0
        self.auth_refusals_in_row = 0
        return self._fire(Event.UP, cause)

    def link_lost(self, end: ConnectionEnd) -> Change | None:
        """The link requests were using ended (called at once, before the supervisor
        hears of it, so that requests made from now on fail at once)."""
        self.last_end = end
        if self.closing or self.state is not State.CONNECTED:
            return None
        if self.dormant_requested and end.by_us:
            return self._fire(Event.WENT_DORMANT, "went dormant; redial armed")
        return self._fire(Event.DROPPED, end.cause)

    def close(self) -> Change | None:
        """The relay is closed (idempotent)."""
        self.closing = True
        if self.state is State.CLOSED:
            return None
        return self._fire(Event.CLOSED, "relay closed")

    # --- what it answers -------------------------------------------------------------

    def after(self, end: ConnectionEnd) -> tuple[Step, list[Change]]:
        """The next step once a link (or a dial) has ended like ``end``."""
        self.last_end = end
        changes: list[Change] = []
        if self.closing:
            return Stop(State.CLOSED, "relay closed"), changes
        if self.state is State.CONNECTED:  # the shell did not report the loss: do it now
            self._record(changes, self.link_lost(end))
        # Only our own close of this link is the dormant one: a drop that beat
        # go_dormant's close to it is an ordinary drop.
        dormant, self.dormant_requested = self.dormant_requested and end.by_us, False
        was_up = end.up_for is not None
        if dormant:
            self.strike = False
            self.backoff.healthy_link_ended(first_redial_taken=True)
            return Redial(self.dormant_redial_delay, "went dormant"), changes

        verdict = classify(end, fresh_token_redial=self.strike)
        self.strike = verdict is Verdict.FRESH_TOKEN_REDIAL
        if verdict is Verdict.REVOKED:
            cause = f"the connector refused a fresh token ({end.reason or end.cause})"
            self._record(changes, self._fire(Event.REVOKED, cause))
            return Stop(State.REVOKED, cause), changes
        if not was_up:
            self._record(changes, self._fire(Event.FAILED, end.cause))

        healthy = self.backoff.is_healthy(end.up_for)
        if self.strike:
            if healthy:
                self.backoff.healthy_link_ended(first_redial_taken=True)
            return Redial(0.0, "4401 after the handshake: one redial with a fresh token"), changes
        if healthy:
            self.backoff.healthy_link_ended()
        patience = end.asks_for_patience
        delay = self.backoff.next_delay(
            refused_dial=not end.had_handshake and not patience,
            retry_after=end.retry_after if patience else None,
        )
        return self._redial_note(end, delay, was_up), changes

    def _redial_note(self, end: ConnectionEnd, delay: float, was_up: bool) -> Redial:
        if was_up:
            self.failures_in_row = 0
            self.auth_refusals_in_row = 0
            return Redial(delay, f"link lost: {end.cause}")
        self.failures_in_row += 1
        if end.auth_refused and not end.had_handshake:
            self.auth_refusals_in_row += 1
            advice = EXPIRED_ADVICE if end.reason == EXPIRED_REASON else AUTH_ADVICE
            note = f"dial failed: {advice} ({end.code} {end.reason or end.cause})"
            return Redial(delay, note, warn=self.auth_refusals_in_row > WARN_AFTER_AUTH_REFUSALS)
        self.auth_refusals_in_row = 0
        note = f"dial failed: {end.cause}" + (f"; {end.advice}" if end.advice else "")
        warn = end.advice is not None or self.failures_in_row > WARN_AFTER_FAILURES
        return Redial(delay, note, warn=warn)

    @staticmethod
    def _record(changes: list[Change], change: Change | None) -> None:
        if change is not None:
            changes.append(change)
