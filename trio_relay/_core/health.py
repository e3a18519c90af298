"""What ``Relay.health()`` says: live or not, ready or not, and why, as one rule.

For a health endpoint: *live* is whether the process should be left running (false only
when the relay can never serve again: revoked, closed, or one of its tasks failed);
*ready* is whether requests can be sent now (connected only). A dormant, held or
reconnecting relay is live and not ready: suspended is not down.

Sans-I/O: the facts are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from .close import ConnectionEnd
from .state import State

__all__ = ["REDIAL_HELD", "Health", "assess"]

REDIAL_HELD = "redial held"
"""The reason while a redial hold keeps a disconnected relay from dialling."""


@dataclass(frozen=True, slots=True)
class Health:
    """The relay's health, from [`Relay.health`][trio_relay.Relay.health]."""

    live: bool
    """False only when the relay can never serve again: ``REVOKED``, ``CLOSED``, or one
    of its tasks failed. A dormant, held or reconnecting relay is live."""
    ready: bool
    """True only while ``CONNECTED`` (and not closing): requests can be sent now."""
    state: State
    since: float
    """When the relay entered ``state``: Trio's clock (``trio.current_time()``), a
    monotonic time in seconds."""
    reason: str
    """Why, in words: ``"connected"``, ``"redial held"``, the last link's end, ..."""
    latched_chats: tuple[str, ...] = ()
    """The chats latched after an egress decline, oldest first: their content requests
    are answered at once until they speak again (``RelayConfig.latch_declines``). Not a
    matter of ``live`` or ``ready``: the relay serves every other chat."""


def assess(
    state: State,
    *,
    since: float,
    closing: bool,
    held: bool,
    tasks_failed: int,
    last_end: ConnectionEnd | None,
    latched_chats: tuple[str, ...] = (),
) -> Health:
    """The health of a relay in ``state`` since ``since``: ``closing`` (leaving
    ``open_relay``), ``held`` (a redial hold is on), ``tasks_failed`` (relay tasks that
    ended by an exception), ``last_end`` (how the last link or dial ended) and
    ``latched_chats`` (the chats latched after a decline)."""
    live = state not in (State.REVOKED, State.CLOSED) and not tasks_failed
    ready = live and state is State.CONNECTED and not closing
    reason = _reason(state, closing, held, tasks_failed, last_end)
    return Health(live, ready, state, since, reason, latched_chats)


def _reason(
    state: State, closing: bool, held: bool, tasks_failed: int, last_end: ConnectionEnd | None
) -> str:
    if state is State.CLOSED:
        return "closed"
    if state is State.REVOKED:
        return "revoked: the connector refused a fresh token; issue new credentials"
    if tasks_failed:
        return f"{tasks_failed} relay task(s) failed; see the log, and restart"
    if closing:
        return "closing"
    if state is State.CONNECTED:
        return "connected"
    if held:
        return REDIAL_HELD
    if state is State.DORMANT:
        return "dormant; redial armed"
    if last_end is None:
        return "connecting: no attempt has ended yet"
    return f"{'connecting' if state is State.CONNECTING else 'reconnecting'}: {last_end.cause}"
