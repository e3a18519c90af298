"""The lifecycle state machine: every transition, every close-code rule and every
redial delay as table rows, with an injected random source (delays are exact).

``RecordingRng`` answers the upper bound of each draw, so a ladder wait reads as its
ceiling (1.0, 2.0, ...) and a quick retry as 0.05, 0.1, ...
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from test_backoff import RecordingRng

from trio_relay._core.backoff import Backoff
from trio_relay._core.close import ConnectionEnd
from trio_relay._core.lifecycle import (
    AUTH_ADVICE,
    EXPIRED_ADVICE,
    TRANSITIONS,
    WARN_AFTER_FAILURES,
    Change,
    Event,
    Lifecycle,
    Redial,
    Stop,
    reachable,
)
from trio_relay._core.state import State

DORMANT_DELAY = 1.25

# How links and dials end.
HEALTHY_1011 = ConnectionEnd("closed by peer", 1011, "overload", had_handshake=True, up_for=60.0)
YOUNG_1011 = replace(HEALTHY_1011, up_for=1.0)
HEALTHY_RESET = ConnectionEnd("closed by peer", had_handshake=True, up_for=30.0)
STALL = ConnectionEnd("keepalive timeout: nothing received for 40.0 s", had_handshake=True,
                      up_for=45.0)
STRIKE = ConnectionEnd("closed by peer", 4401, "unauthorized", had_handshake=True, up_for=60.0)
STRIKE_YOUNG = replace(STRIKE, up_for=0.5)
STRIKE_REVOKED = replace(STRIKE, reason="revoked")
EXPIRED_UP = replace(STRIKE, reason="expired")
AUTH_AT_UPGRADE = ConnectionEnd("closed by peer", 4401, "unauthorized")
HTTP_401 = ConnectionEnd("the connector refused the WebSocket upgrade with HTTP 401", 4401,
                         "unauthorized", http_status=401)
EXPIRED_AT_UPGRADE = ConnectionEnd("closed by peer", 4401, "expired")
REFUSED = ConnectionEnd("connect failed: OSError: connection refused")
HTTP_503 = ConnectionEnd("HTTP 503", http_status=503)
HTTP_503_RETRY = replace(HTTP_503, retry_after=7.0)
HTTP_429_RETRY_LONG = ConnectionEnd("HTTP 429", http_status=429, retry_after=3600.0)
HTTP_408 = ConnectionEnd("HTTP 408", http_status=408)
HTTP_404 = ConnectionEnd("HTTP 404", http_status=404, advice="check the URL's path")
OURS = ConnectionEnd("closed by us", 1000, "bye", by_us=True, had_handshake=True, up_for=60.0)
DORMANT_CLOSE = replace(OURS, reason="dormant", cause="went dormant")


def lifecycle(start: State) -> Lifecycle:
    life = Lifecycle(Backoff(rng=RecordingRng()), dormant_redial_delay=DORMANT_DELAY)
    if start is State.CONNECTED:
        life.link_up("handshake done")
    return life


def outcome(step: Redial | Stop) -> float | State:
    return step.delay if isinstance(step, Redial) else step.state


# --- the transition table ------------------------------------------------------------


def test_every_state_has_a_row_and_every_target_is_a_state() -> None:
    assert set(TRANSITIONS) == set(State)
    for row in TRANSITIONS.values():
        assert set(row.values()) <= set(State)


@pytest.mark.parametrize(("state", "event"), list(itertools.product(State, Event)))
def test_events_outside_the_table_are_refused(state: State, event: Event) -> None:
    life = lifecycle(State.CONNECTING)
    life.state = state
    target = TRANSITIONS[state].get(event)
    if target is None:
        with pytest.raises(RuntimeError, match="no transition"):
            life._fire(event, "test")
        assert life.state is state
    else:
        change = life._fire(event, "test")
        assert life.state is target
        assert change == (None if target is state else Change(state, target, "test"))


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (State.CONNECTING, set(State)),
        (State.REVOKED, {State.REVOKED, State.CLOSED}),
        (State.CLOSED, {State.CLOSED}),
    ],
)
def test_reachable(state: State, expected: set[State]) -> None:
    assert reachable(state) == expected


def test_closed_and_revoked_are_terminal() -> None:
    assert TRANSITIONS[State.CLOSED] == {}
    assert TRANSITIONS[State.REVOKED] == {Event.CLOSED: State.CLOSED}


# --- what follows an end: sequences of ends, each row from a fresh lifecycle -----------

ROWS: list[tuple[str, State, list[ConnectionEnd], list[float | State], State]] = [
    # Ordinary drops of a healthy link: at once; refused dials then retry quickly.
    ("healthy-1011", State.CONNECTED, [HEALTHY_1011], [0.0], State.RECONNECTING),
    ("healthy-reset", State.CONNECTED, [HEALTHY_RESET], [0.0], State.RECONNECTING),
    ("healthy-stall", State.CONNECTED, [STALL], [0.0], State.RECONNECTING),
    ("restart", State.CONNECTED, [HEALTHY_1011, *[REFUSED] * 6],
     [0.0, 0.05, 0.1, 0.2, 0.4, 1.0, 2.0], State.RECONNECTING),
    # A young death is flapping: the ladder, and it is kept across young deaths.
    ("young", State.CONNECTED, [YOUNG_1011], [1.0], State.RECONNECTING),
    ("flapping", State.CONNECTED, [YOUNG_1011, YOUNG_1011, YOUNG_1011], [1.0, 2.0, 4.0],
     State.RECONNECTING),
    ("young-then-refused", State.CONNECTED, [YOUNG_1011, REFUSED], [1.0, 2.0],
     State.RECONNECTING),
    ("healthy-resets-ladder", State.CONNECTED, [YOUNG_1011, YOUNG_1011, HEALTHY_1011],
     [1.0, 2.0, 0.0], State.RECONNECTING),
    # Never connected: the ladder from its first rung.
    ("never-refused", State.CONNECTING, [REFUSED] * 3, [1.0, 2.0, 4.0], State.CONNECTING),
    # 4401 before any descriptor: a provisioning race, retried with backoff.
    ("4401-at-upgrade", State.CONNECTING, [AUTH_AT_UPGRADE] * 3, [1.0, 2.0, 4.0],
     State.CONNECTING),
    ("http-401", State.CONNECTING, [HTTP_401], [1.0], State.CONNECTING),
    # 4401 "expired": never a revocation, before or after a handshake.
    ("expired-at-upgrade", State.CONNECTING, [EXPIRED_AT_UPGRADE] * 2, [1.0, 2.0],
     State.CONNECTING),
    ("expired-up", State.CONNECTED, [EXPIRED_UP], [0.0], State.RECONNECTING),
    # 4401 after a handshake: one redial at once with a fresh token...
    ("strike", State.CONNECTED, [STRIKE], [0.0], State.RECONNECTING),
    ("strike-young", State.CONNECTED, [STRIKE_YOUNG], [0.0], State.RECONNECTING),
    # ...then the fresh token refused at upgrade, or its link closed with 4401: revoked.
    ("strike-refused", State.CONNECTED, [STRIKE, AUTH_AT_UPGRADE], [0.0, State.REVOKED],
     State.REVOKED),
    ("strike-http-403", State.CONNECTED, [STRIKE, replace(HTTP_401, http_status=403)],
     [0.0, State.REVOKED], State.REVOKED),
    ("strike-twice", State.CONNECTED, [STRIKE, STRIKE], [0.0, State.REVOKED], State.REVOKED),
    ("strike-revoked", State.CONNECTED, [STRIKE, STRIKE_REVOKED], [0.0, State.REVOKED],
     State.REVOKED),
    # ...unless the second says "expired", or the fresh link drops for another reason:
    # then the strike is forgotten and the next 4401 is a first strike again.
    ("strike-expired", State.CONNECTED, [STRIKE, EXPIRED_AT_UPGRADE], [0.0, 0.05],
     State.RECONNECTING),
    ("strike-then-drop", State.CONNECTED, [STRIKE, HEALTHY_RESET, STRIKE], [0.0, 0.0, 0.0],
     State.RECONNECTING),
    ("strike-then-refused", State.CONNECTED, [STRIKE, REFUSED, STRIKE], [0.0, 0.05, 0.0],
     State.RECONNECTING),
    # HTTP answers that ask for patience: the ladder, or Retry-After up to backoff_max.
    ("http-503", State.CONNECTING, [HTTP_503], [1.0], State.CONNECTING),
    ("http-503-retry-after", State.CONNECTING, [HTTP_503_RETRY], [7.0], State.CONNECTING),
    ("http-429-capped", State.CONNECTING, [HTTP_429_RETRY_LONG], [30.0], State.CONNECTING),
    ("http-408-after-healthy", State.CONNECTED, [HEALTHY_1011, HTTP_408, HTTP_408],
     [0.0, 1.0, 2.0], State.RECONNECTING),
    ("http-404", State.CONNECTING, [HTTP_404], [1.0], State.CONNECTING),
    # Our own close that is not dormant (nor the relay's closing): an ordinary redial.
    ("ours", State.CONNECTED, [OURS], [0.0], State.RECONNECTING),
]


@pytest.mark.parametrize(
    ("start", "ends", "steps", "final"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_what_follows_each_end(
    start: State, ends: list[ConnectionEnd], steps: list[float | State], final: State
) -> None:
    life = lifecycle(start)
    got = []
    for end in ends:
        step, _ = life.after(end)
        got.append(outcome(step))
        if isinstance(step, Stop):
            break
    assert got == steps
    assert life.state is final


def test_states_reported_for_a_revocation() -> None:
    life = lifecycle(State.CONNECTED)
    assert life.link_lost(STRIKE) == Change(State.CONNECTED, State.RECONNECTING, "closed by peer")
    step, changes = life.after(STRIKE)
    assert step == Redial(0.0, "4401 after the handshake: one redial with a fresh token")
    assert changes == []  # already RECONNECTING
    assert life.strike
    step, changes = life.after(AUTH_AT_UPGRADE)
    cause = "the connector refused a fresh token (unauthorized)"
    assert step == Stop(State.REVOKED, cause)
    assert changes == [Change(State.RECONNECTING, State.REVOKED, cause)]


def test_after_reports_the_loss_if_the_shell_did_not() -> None:
    life = lifecycle(State.CONNECTED)
    _, changes = life.after(HEALTHY_1011)
    assert changes == [Change(State.CONNECTED, State.RECONNECTING, "closed by peer")]


# --- dormant and closing -------------------------------------------------------------


def test_dormant_close_waits_the_dormant_delay_then_retries_quickly() -> None:
    life = lifecycle(State.CONNECTED)
    life.dormant_requested = True
    assert life.link_lost(DORMANT_CLOSE) == Change(
        State.CONNECTED, State.DORMANT, "went dormant; redial armed"
    )
    step, changes = life.after(DORMANT_CLOSE)
    assert (step, changes) == (Redial(DORMANT_DELAY, "went dormant"), [])
    assert not life.dormant_requested
    step, changes = life.after(REFUSED)  # the armed redial failed
    assert outcome(step) == 0.05
    assert changes == [Change(State.DORMANT, State.RECONNECTING, REFUSED.cause)]


def test_a_drop_that_beats_the_dormant_close_is_an_ordinary_drop() -> None:
    life = lifecycle(State.CONNECTED)
    life.dormant_requested = True
    assert life.link_lost(HEALTHY_RESET) == Change(
        State.CONNECTED, State.RECONNECTING, "closed by peer"
    )
    step, _ = life.after(HEALTHY_RESET)
    assert step == Redial(0.0, "link lost: closed by peer")
    assert not life.dormant_requested


@pytest.mark.parametrize("end", [OURS, HEALTHY_1011, STRIKE, REFUSED])
def test_closing_stops_whatever_the_end(end: ConnectionEnd) -> None:
    life = lifecycle(State.CONNECTED)
    life.strike = True
    life.closing = True
    assert life.link_lost(end) is None  # no RECONNECTING on the way to CLOSED
    assert life.after(end) == (Stop(State.CLOSED, "relay closed"), [])
    assert life.close() == Change(State.CONNECTED, State.CLOSED, "relay closed")
    assert life.close() is None


def test_revoked_then_closed() -> None:
    life = lifecycle(State.CONNECTED)
    life.after(STRIKE)
    life.after(STRIKE)
    assert life.state is State.REVOKED
    assert life.close() == Change(State.REVOKED, State.CLOSED, "relay closed")


# --- what is said about it -----------------------------------------------------------


def test_repeated_failures_escalate_from_info_to_warning() -> None:
    life = lifecycle(State.CONNECTED)
    step, _ = life.after(HEALTHY_1011)
    assert isinstance(step, Redial) and not step.warn
    warns = []
    for _ in range(WARN_AFTER_FAILURES + 2):
        step, _ = life.after(REFUSED)
        assert isinstance(step, Redial)
        assert step.note == f"dial failed: {REFUSED.cause}"
        warns.append(step.warn)
    assert warns == [False] * WARN_AFTER_FAILURES + [True, True]
    # A link that comes up starts the count afresh.
    life.link_up("up")
    life.after(YOUNG_1011)
    step, _ = life.after(REFUSED)
    assert isinstance(step, Redial) and not step.warn


def test_credentials_refused_says_so_and_warns_from_the_second_in_a_row() -> None:
    life = lifecycle(State.CONNECTING)
    notes = []
    for end in (AUTH_AT_UPGRADE, HTTP_401, AUTH_AT_UPGRADE):
        step, _ = life.after(end)
        assert isinstance(step, Redial)
        notes.append((step.note, step.warn))
    assert notes == [
        (f"dial failed: {AUTH_ADVICE} (4401 unauthorized)", False),
        (f"dial failed: {AUTH_ADVICE} (4401 unauthorized)", True),
        (f"dial failed: {AUTH_ADVICE} (4401 unauthorized)", True),
    ]
    assert AUTH_ADVICE == "the connector refused our credentials: check the gateway id and secret"
    # Another kind of failure breaks the run.
    life.after(REFUSED)
    step, _ = life.after(AUTH_AT_UPGRADE)
    assert isinstance(step, Redial) and not step.warn


def test_expired_at_upgrade_points_at_the_clock_not_the_secret() -> None:
    step, _ = lifecycle(State.CONNECTING).after(EXPIRED_AT_UPGRADE)
    assert isinstance(step, Redial)
    assert step.note == f"dial failed: {EXPIRED_ADVICE} (4401 expired)"


def test_a_failure_with_advice_warns_at_once_and_says_what_to_check() -> None:
    step, _ = lifecycle(State.CONNECTING).after(HTTP_404)
    assert step == Redial(1.0, "dial failed: HTTP 404; check the URL's path", warn=True)


def test_the_last_end_is_kept_for_diagnostics() -> None:
    life = lifecycle(State.CONNECTED)
    life.link_lost(STRIKE)
    assert life.last_end is STRIKE
    life.after(REFUSED)
    assert life.last_end is REFUSED
