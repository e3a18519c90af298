"""``Relay.health()``'s rule as a table: live, ready and the reason for every state,
held or not, closing or not, with a failed task or not. Pure: the facts are passed in."""

from __future__ import annotations

import pytest

from trio_relay import Health, State
from trio_relay._core.close import ConnectionEnd
from trio_relay._core.health import REDIAL_HELD, assess

DROP = ConnectionEnd("closed by peer", 1011, "overload", had_handshake=True, up_for=60.0)
REFUSED = ConnectionEnd("connection refused (ECONNREFUSED)")

# state, held, closing, tasks failed, last end -> live, ready, reason
ROWS: list[tuple[State, bool, bool, int, ConnectionEnd | None, bool, bool, str]] = [
    (State.CONNECTING, False, False, 0, None, True, False, "connecting: no attempt has ended yet"),
    (State.CONNECTING, False, False, 0, REFUSED, True, False,
     "connecting: connection refused (ECONNREFUSED)"),
    (State.CONNECTING, True, False, 0, None, True, False, REDIAL_HELD),
    (State.CONNECTED, False, False, 0, None, True, True, "connected"),
    (State.CONNECTED, True, False, 0, None, True, True, "connected"),  # held for later
    (State.CONNECTED, False, True, 0, None, True, False, "closing"),
    (State.RECONNECTING, False, False, 0, DROP, True, False, "reconnecting: closed by peer"),
    (State.RECONNECTING, True, False, 0, DROP, True, False, REDIAL_HELD),
    (State.DORMANT, False, False, 0, DROP, True, False, "dormant; redial armed"),
    (State.DORMANT, True, False, 0, DROP, True, False, REDIAL_HELD),
    (State.REVOKED, False, False, 0, DROP, False, False,
     "revoked: the connector refused a fresh token; issue new credentials"),
    (State.REVOKED, True, False, 0, DROP, False, False,
     "revoked: the connector refused a fresh token; issue new credentials"),
    (State.CLOSED, False, True, 0, DROP, False, False, "closed"),
    (State.CLOSED, False, True, 1, DROP, False, False, "closed"),
    (State.CONNECTED, False, False, 1, None, False, False,
     "1 relay task(s) failed; see the log, and restart"),
    (State.DORMANT, True, False, 2, None, False, False,
     "2 relay task(s) failed; see the log, and restart"),
]


@pytest.mark.parametrize(
    ("state", "held", "closing", "failed", "end", "live", "ready", "reason"), ROWS
)
def test_health(
    state: State,
    held: bool,
    closing: bool,
    failed: int,
    end: ConnectionEnd | None,
    live: bool,
    ready: bool,
    reason: str,
) -> None:
    health = assess(
        state, since=12.5, closing=closing, held=held, tasks_failed=failed, last_end=end
    )
    assert health == Health(live, ready, state, 12.5, reason)


def test_every_state_has_a_row() -> None:
    assert {row[0] for row in ROWS} == set(State)
