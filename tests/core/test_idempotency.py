"""Idempotency keys in the sans-I/O core: the key rule, the relay's own keys, the
descriptor field, the frame with its key, the outcome's attempts, and the resend plan."""

from __future__ import annotations

import json

import pytest

from trio_relay import Descriptor, Outcome
from trio_relay._core import outcome as _outcome
from trio_relay._core.idempotency import (
    CONTENT_OPS,
    MAX_ATTEMPTS,
    IdempotencyKeys,
    ResendPlan,
    check_key,
)
from trio_relay._core.protocol import encode_request, with_request_id
from trio_relay._core.request_ids import RequestIds

BASE = {"contract_version": 1, "platform": "slack", "label": "Slack"}


@pytest.mark.parametrize("key", ["a", "order-42", "tr.0a1b2c3d4e5f.1f", "x:y_z.-", "k" * 64])
def test_valid_keys_pass(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "k" * 65, "has space", "é", "a/b", 'quote"'])
def test_invalid_keys_are_refused_saying_what_a_key_is(key: str) -> None:
    with pytest.raises(ValueError, match=r"1 to 64 characters of A-Z a-z 0-9 _ \. : -"):
        check_key(key)


def test_a_key_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        check_key(42)


def test_the_relays_keys_are_unique_valid_and_cost_one_random_draw() -> None:
    draws: list[int] = []

    def random_bytes(n: int) -> bytes:
        draws.append(n)
        return bytes(range(n))

    keys = IdempotencyKeys(random_bytes)
    made = [keys.next() for _ in range(10_000)]
    assert len(set(made)) == len(made)
    assert all(check_key(key) == key for key in made)
    assert made[0] == "tr.000102030405.1"
    assert draws == [6]  # one draw for the process's prefix, none per key
    assert "tr." not in repr(keys)


def test_two_processes_keys_differ() -> None:
    assert IdempotencyKeys().next() != IdempotencyKeys().next()


def test_content_ops_are_the_contracts_list() -> None:
    contract = {"send", "edit", "delete", "prompt", "follow_up", "send_media", "task_card"}
    assert contract == CONTENT_OPS


@pytest.mark.parametrize(
    ("value", "window"),
    [(600, 600.0), (0.5, 0.5), (None, None), (0, None), (-3, None), (True, None), ("60", None)],
)
def test_descriptor_reads_the_window(value: object, window: float | None) -> None:
    wire = dict(BASE) if value is None else {**BASE, "idempotency_window_s": value}
    assert Descriptor.from_wire(wire).idempotency_window_s == window


def _encode(action: dict[str, object], key: str | None) -> tuple[str, bytes]:
    return encode_request(
        RequestIds(),
        action,
        platform="slack",
        bot_id="B1",
        max_message_bytes=1 << 20,
        idempotency_key=key,
    )


def test_the_key_goes_in_the_action() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    request_id, line = _encode(action, "order-42")
    frame = json.loads(line)
    assert frame["action"] == {**action, "idempotency_key": "order-42"}
    assert frame["requestId"] == request_id and frame["platform"] == "slack"
    assert action == {"op": "send", "chat_id": "C1", "content": "hi"}  # not changed


def test_without_a_key_the_frame_is_byte_identical() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    request_id, line = _encode(action, None)
    assert line == (
        b'{"type":"outbound","requestId":"' + request_id.encode() + b'","action":'
        b'{"op":"send","chat_id":"C1","content":"hi"},"platform":"slack","botId":"B1"}\n'
    )


def test_a_frame_sent_again_differs_only_in_its_request_id() -> None:
    _, line = _encode({"op": "send", "chat_id": "C1", "content": "hi"}, "k1")
    again = with_request_id(line, "0123456789abcdef")
    first, second = json.loads(line), json.loads(again)
    assert second["requestId"] == "0123456789abcdef"
    assert {**first, "requestId": None} == {**second, "requestId": None}
    with pytest.raises(ValueError, match="another length"):
        with_request_id(line, "short")


def test_outcome_attempts_and_replayed() -> None:
    answered = Outcome.answered({"success": True, "message_id": "m1", "replayed": True})
    assert answered.attempts == 1 and answered.replayed
    assert not Outcome.answered({"success": True}).replayed
    assert _outcome.plain_success().attempts == 1
    assert _outcome.not_connected("connecting").attempts == 0  # nothing written
    assert _outcome.connection_lost("reset").attempts == 1
    twice = _outcome.with_attempts(answered, 2)
    assert twice.attempts == 2 and twice == answered  # attempts take no part in equality
    assert "attempts=2" in repr(twice)


def test_the_plan_gives_each_attempt_half_the_time_left() -> None:
    plan = ResendPlan(deadline=16.0)
    assert plan.attempt_deadline(0.0) == 8.0
    assert plan.again(8.0)
    assert plan.attempt_deadline(8.0) == 12.0
    assert plan.attempt_deadline(12.0) == 14.0
    assert not plan.again(16.0)  # the deadline is the end


def test_the_last_attempt_gets_the_rest() -> None:
    plan = ResendPlan(deadline=1000.0)
    deadlines = [plan.attempt_deadline(0.0) for _ in range(MAX_ATTEMPTS + 1)]
    assert deadlines[0] == 500.0 and deadlines[-2:] == [1000.0, 1000.0]
    assert plan.again(999.0)  # a connection's end still starts another


def test_no_flurry_close_to_the_deadline() -> None:
    plan = ResendPlan(deadline=1.05)
    assert plan.attempt_deadline(1.0) == 1.05  # too little left to halve
