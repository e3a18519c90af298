"""A connector you can talk to: its op table, checked directly and on the wire.

The table itself is checked directly (it is plain data); the rest on real loopback
sockets, through a raw gateway that sends exactly what each test writes. Tenants,
prompts and transcripts: ``test_connector_chats.py``; the entry points:
``test_connector_entry_points.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from connector_ops_support import DROP, MINIMAL, action, request
from connector_support import dial

import trio_relay
from trio_relay._core.descriptor import LEGACY_OPS
from trio_relay.testing import open_connector
from trio_relay.testing._ops import OP_TABLE, check_action

ALL_OPS = frozenset(OP_TABLE)


# --- the table ---------------------------------------------------------------------


def test_the_table_has_every_op_of_the_protocol() -> None:
    assert set(MINIMAL) == set(OP_TABLE)
    assert LEGACY_OPS <= ALL_OPS


@pytest.mark.parametrize("op", sorted(MINIMAL))
def test_a_minimal_action_of_each_op_is_accepted(op: str) -> None:
    assert check_action(action(op), ALL_OPS) is None
    with_optional = action(op, metadata={"scope_id": "G1"}, unknown_field=[1, 2])
    if op != "get_chat_info":
        assert check_action(with_optional, ALL_OPS) is None


@pytest.mark.parametrize(
    ("op", "field"),
    [(op, f) for op, fields in MINIMAL.items() for f in fields],
)
def test_every_required_field_is_named_when_missing(op: str, field: str) -> None:
    refusal = check_action(action(op, **{field: DROP}), ALL_OPS)
    assert refusal is not None and refusal.code == "invalid_action"
    assert refusal.error == f"invalid action: {op!r} needs field {field!r}"
    assert refusal.result() == {"success": False, "code": "invalid_action", "error": refusal.error}


@pytest.mark.parametrize(
    ("op", "changes", "expected"),
    [
        (
            "send",
            {"chat_id": ["C1"]},
            "field 'chat_id' of 'send' must be a string or an integer, got a list",
        ),
        (
            "send",
            {"chat_id": True},
            "field 'chat_id' of 'send' must be a string or an integer, got a boolean",
        ),
        ("send", {"content": 5}, "field 'content' of 'send' must be a string, got a number"),
        ("send", {"metadata": "G1"}, "field 'metadata' of 'send' must be an object, got a string"),
        ("send", {"reply_to": {}}, "field 'reply_to' of 'send' must be a string or an integer"),
        ("typing", {"content": None}, None),  # null reads as absent
        ("typing", {"content": ""}, None),  # the Slack clear
        ("edit", {"message_id": 17}, None),  # numeric ids are ids
        (
            "send_media",
            {"media_kind": "gif"},
            "must be one of image, voice, audio, video, document",
        ),
        ("react", {"remove": "yes"}, "field 'remove' of 'react' must be a boolean, got a string"),
        (
            "thread_create",
            {"thread_name": "x" * 101},
            "field 'thread_name' of 'thread_create' must be at most 100 characters",
        ),
        ("thread_create", {"thread_name": "x" * 100}, None),
        (
            "prompt",
            {"prompt_kind": "poll"},
            "field 'prompt_kind' of 'prompt' must be one of approval, clarify, choice",
        ),
        ("prompt", {"prompt_id": "has space"}, "field 'prompt_id' of 'prompt' must use only"),
        ("prompt", {"options": []}, "field 'options' of 'prompt' must list at least one option"),
        ("prompt", {"options": ["yes"]}, "field 'options' of 'prompt' [0] must be an object"),
        (
            "prompt",
            {"options": [{"id": "y" * 33, "label": "Y"}]},
            "[0].id must be at most 32 characters",
        ),
        ("prompt", {"options": [{"id": "ok", "label": 1}]}, "[0].label must be a string"),
        ("prompt", {"timeout_s": 0}, "field 'timeout_s' of 'prompt' must be positive"),
        (
            "prompt",
            {"timeout_s": True},
            "field 'timeout_s' of 'prompt' must be a number, got a boolean",
        ),
        ("prompt", {"prompt_id": "p" * 60}, "field 'prompt_id' of 'prompt' is too long"),
        ("draft", {"draft_id": "1"}, "field 'draft_id' of 'draft' must be an integer"),
        ("draft", {"draft_id": True}, "field 'draft_id' of 'draft' must be an integer"),
        ("draft", {"draft_id": 0}, "field 'draft_id' of 'draft' must be positive"),
        ("draft", {"final": "yes"}, "field 'final' of 'draft' must be a boolean"),
        (
            "task_card",
            {"chunks": [{"id": "t1", "title": "x", "status": "done"}]},
            "[0].status must be one of pending, in_progress, complete, error",
        ),
        ("task_card", {"chunks": ["t1"]}, "field 'chunks' of 'task_card' [0] must be an object"),
        ("task_card", {"chunks": [{"id": "t1", "status": "pending"}]}, "[0].title must be"),
        (
            "task_card",
            {"chunks": [{"id": "t", "title": "x", "status": "error", "details": 3}]},
            "[0].details must be a string",
        ),
    ],
)
def test_mistyped_fields_are_named(op: str, changes: dict[str, Any], expected: str | None) -> None:
    refusal = check_action(action(op, **changes), ALL_OPS)
    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.code == "invalid_action"
        assert refusal.error.startswith("invalid action: ")
        assert expected in refusal.error


def test_unknown_and_unsupported_ops_are_refused() -> None:
    unknown = check_action({"op": "teleport", "chat_id": "C1"}, ALL_OPS)
    assert unknown is not None and unknown.code == "unknown_op" and "'teleport'" in unknown.error
    unsupported = check_action(action("react"), LEGACY_OPS)
    assert unsupported is not None and unsupported.code == "unsupported_op"
    assert unsupported.error == (
        "op 'react' is not in this platform's supported_ops (edit, follow_up, send, typing)"
    )
    no_op = check_action({"chat_id": "C1"}, ALL_OPS)
    assert no_op is not None and "'op'" in no_op.error


# --- on the wire -------------------------------------------------------------------

EVERYTHING = {"slack": {"supported_ops": sorted(OP_TABLE)}}


async def test_each_op_gets_the_result_a_platform_gives() -> None:
    async with open_connector(descriptors=EVERYTHING) as connector, dial(connector) as peer:
        await peer.handshake("slack")
        connector.say("C1", "hello", platform="slack")
        await peer.frame()
        results = {op: await request(peer, op, action(op)) for op in MINIMAL}
    assert results["send"] == {"success": True, "message_id": "m1"}
    assert results["edit"] == results["typing"] == results["react"] == {"success": True}
    assert results["thread_create"]["thread_id"].startswith("t")
    assert results["get_chat_info"] == {"success": True, "chat_info": {"name": "C1", "type": "dm"}}
    assert all(result["success"] for result in results.values())


async def test_invalid_and_unsupported_actions_fail_without_reaching_the_handler() -> None:
    handled: list[str] = []

    async def handler(session: Any, frame: Any) -> dict[str, Any]:
        handled.append(frame.request_id)
        return {"success": True}

    legacy = {"*": {"supported_ops": []}}  # the legacy set: react is not among them
    async with (
        open_connector(outbound_handler=handler, descriptors=legacy) as connector,
        dial(connector) as peer,
    ):
        await peer.handshake("slack")
        missing = await request(peer, "r1", {"op": "send", "chat_id": "C1"})
        react = await request(peer, "r2", action("react"))
        other = await request(peer, "r3", action("send"), platform="discord")
        fine = await request(peer, "r4", action("send"), platform="slack")
    assert missing["success"] is False and "'content'" in missing["error"]
    assert react["code"] == "unsupported_op"
    assert other["code"] == "unknown_platform"
    assert other["error"].endswith(
        "'discord' was not announced with a hello on this connection (announced: slack)"
    )
    assert fine == {"success": True}
    assert handled == ["r4"]
    assert connector.outbound_count == 4  # refused frames are still counted and recorded


async def test_validate_false_answers_anything() -> None:
    async with open_connector(validate=False) as connector, dial(connector) as peer:
        await peer.handshake()
        assert (await request(peer, "r1", {"op": "teleport"}))["success"] is True


async def test_a_relay_request_with_a_missing_field_fails_definitely() -> None:
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        outcome = await relay.request({"op": "edit", "chat_id": "C1", "content": "x"})
    assert not outcome.success and not outcome.ambiguous
    assert outcome.code == "invalid_action"
    assert outcome.error == "invalid action: 'edit' needs field 'message_id'"
