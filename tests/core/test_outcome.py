"""Outcome: the table of docs/protocol.md, "Outcomes"."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from trio_relay._core import outcome as _outcome
from trio_relay._core.outcome import (
    Outcome,
    closing,
    connection_lost,
    not_connected,
    queue_full,
    revoked,
    timed_out,
    unsupported_op,
    write_failed,
)


def test_answered_success_passes_result_through() -> None:
    result = {"success": True, "message_id": "m1", "thread_id": "t1"}
    out = Outcome.answered(result)
    assert out.success is True
    assert out.ambiguous is False
    assert out.error is None and out.code is None
    assert out.result is result


def test_answered_failure_carries_error_and_code() -> None:
    out = Outcome.answered({"success": False, "error": "chat not found", "code": "not_found"})
    assert out.success is False
    assert out.ambiguous is False
    assert out.error == "chat not found"
    assert out.code == "not_found"


def test_egress_declined_is_definite() -> None:
    result = {"success": False, "code": "egress_declined", "error": "policy"}
    out = Outcome.answered(result)
    assert out.success is False
    assert out.ambiguous is False  # the connector refused: nothing was applied
    assert out.code == _outcome.EGRESS_DECLINED == "egress_declined"
    assert out.result == result


@pytest.mark.parametrize(
    "result",
    [{}, {"success": False}, {"success": None}, {"success": "true"}, {"success": 1}],
)
def test_answered_success_only_when_true(result: dict[str, Any]) -> None:
    out = Outcome.answered(result)
    assert out.success is False
    assert out.ambiguous is False


def test_answered_ignores_non_string_error_and_code() -> None:
    out = Outcome.answered({"success": False, "error": {"msg": "x"}, "code": 42})
    assert out.error is None and out.code is None


# (constructor, expected code, ambiguous)
TABLE: list[tuple[str, Callable[[], Outcome], str, bool]] = [
    ("client closing", closing, "closing", False),
    ("not connected", lambda: not_connected("RECONNECTING"), "not_connected", False),
    ("write failed", lambda: write_failed("broken pipe"), "write_failed", False),
    ("written, then lost", lambda: connection_lost("1006"), "connection_lost", True),
    ("written, no result", lambda: timed_out(30, written=True), "timeout", True),
    ("never written in time", lambda: timed_out(30, written=False), "timeout", False),
    ("revoked", revoked, "revoked", False),
    ("queue full", lambda: queue_full(1000), "queue_full", False),
    ("unsupported op", lambda: unsupported_op("react", "slack"), "unsupported_op", False),
]


@pytest.mark.parametrize(
    ("make", "code", "ambiguous"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_gateway_outcomes(make: Callable[[], Outcome], code: str, ambiguous: bool) -> None:
    out = make()
    assert out.success is False
    assert out.ambiguous is ambiguous
    assert out.code == code
    assert isinstance(out.error, str) and out.error
    assert out.result == {}


def test_messages_name_the_details() -> None:
    assert "RECONNECTING" in (not_connected("RECONNECTING").error or "")
    assert "broken pipe" in (write_failed("broken pipe").error or "")
    assert "1006" in (connection_lost("1006").error or "")
    assert "30 s" in (timed_out(30.0, written=True).error or "")
    assert "1000" in (queue_full(1000).error or "")
    error = unsupported_op("react", "slack").error or ""
    assert "react" in error and "slack" in error


def test_ambiguous_messages_warn_against_blind_retry() -> None:
    for out in (connection_lost("x"), timed_out(1, written=True)):
        assert "may have applied" in (out.error or "")
    for out in (closing(), write_failed("x"), timed_out(1, written=False), not_connected("X")):
        assert "nothing was sent" in (out.error or "")


def test_definite_and_ambiguous_constructors() -> None:
    assert Outcome.definite("c", "e") == Outcome(False, False, "e", "c", {})
    assert Outcome.ambiguous_failure("c", "e") == Outcome(False, True, "e", "c", {})


def test_outcome_is_frozen_and_defaults_not_shared() -> None:
    a, b = Outcome(True), Outcome(True)
    assert a.result == {} and a.result is not b.result
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.success = False  # type: ignore[misc]


def test_codes() -> None:
    assert (
        _outcome.CLOSING,
        _outcome.NOT_CONNECTED,
        _outcome.WRITE_FAILED,
        _outcome.CONNECTION_LOST,
        _outcome.TIMEOUT,
        _outcome.REVOKED,
        _outcome.QUEUE_FULL,
        _outcome.UNSUPPORTED_OP,
    ) == (
        "closing",
        "not_connected",
        "write_failed",
        "connection_lost",
        "timeout",
        "revoked",
        "queue_full",
        "unsupported_op",
    )


@pytest.mark.parametrize(
    ("result", "declined"),
    [
        ({"success": False, "code": "egress_declined", "error": "no scope"}, True),
        ({"success": False, "error": "egress declined: reply lacks scope_id"}, True),
        ({"success": False, "error": "Egress declined: missing profile"}, True),
        ({"success": False, "error": "declined egress"}, False),
        ({"success": False, "code": "rate_limited", "error": "slow down"}, False),
        ({"success": True, "code": "egress_declined"}, False),
        ({"success": False}, False),
    ],
)
def test_egress_declined_from_the_connector(result: dict[str, object], declined: bool) -> None:
    assert Outcome.answered(dict(result)).egress_declined is declined


SLACK_DECLINE = (
    "Slack egress declined: target is not an approved destination for this connection"
)


@pytest.mark.parametrize(
    ("error", "declined"),
    [
        (SLACK_DECLINE, True),  # the real connector's text: the platform comes first
        ("discord EGRESS DECLINED: target is not approved", True),
        ("relay: egress declined: no", True),
        ("egress declined (no colon)", False),
        ("egress declined: but the ack was lost", False),
        ("slack egress declined: target ... (ack lost, retry)", False),
        ("Egress declined: acknowledgement lost in transit", False),
        ("egress declined: acks are lost sometimes", False),
        ("egress declined: lost track of the rack", True),  # neither word is "ack"
    ],
)
def test_a_decline_is_the_marker_anywhere_in_any_case_but_never_a_lost_ack(
    error: str, declined: bool
) -> None:
    outcome = Outcome.answered({"success": False, "error": error})
    assert outcome.egress_declined is declined
    # A decline said only in words reads like one said with the code, result untouched.
    assert outcome.code == ("egress_declined" if declined else None)
    assert outcome.result == {"success": False, "error": error}


def test_a_coded_decline_that_speaks_of_a_lost_ack_is_not_one() -> None:
    coded = Outcome.answered({"success": False, "code": "egress_declined", "error": "ack lost"})
    assert not coded.egress_declined
    other = Outcome.answered({"success": False, "code": "platform_error", "error": SLACK_DECLINE})
    assert other.egress_declined and other.code == "platform_error"  # the code kept


def test_egress_declined_never_when_ambiguous() -> None:
    outcome = Outcome.ambiguous_failure(_outcome.EGRESS_DECLINED, "egress declined: maybe")
    assert not outcome.egress_declined
    assert not _outcome.timed_out(1, written=True).egress_declined
    assert not _outcome.connection_lost("reset").egress_declined


def test_plain_success_is_the_answer_success_true_with_a_result_of_its_own() -> None:
    first, second = _outcome.plain_success(), _outcome.plain_success()
    assert first == second == Outcome.answered({"success": True})
    assert repr(first) == repr(Outcome.answered({"success": True}))
    assert first.result is not second.result
