"""A connector you can talk to: the op table, tenant checks, prompts, transcripts.

The table itself is checked directly (it is plain data); everything else on real
loopback sockets, through a raw gateway that sends exactly what each test writes.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import trio
from connector_support import Peer, dial, hello, line, outbound

import trio_relay
from trio_relay._core.descriptor import LEGACY_OPS
from trio_relay.testing import ReferenceConnector, open_connector, serve_connector
from trio_relay.testing._ops import OP_TABLE, check_action

ALL_OPS = frozenset(OP_TABLE)

MINIMAL: dict[str, dict[str, Any]] = {
    "send": {"chat_id": "C1", "content": "hi"},
    "edit": {"chat_id": "C1", "message_id": "m1", "content": "hi"},
    "typing": {"chat_id": "C1"},
    "follow_up": {"session_key": "s", "kind": "discord.interaction_token", "content": "x"},
    "send_media": {"chat_id": "C1", "media_kind": "image", "source_url": "http://x/1"},
    "prompt": {
        "chat_id": "C1",
        "prompt_kind": "approval",
        "prompt_id": "n0nce.0a1b2c3d",
        "content": "Deploy?",
        "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
    },
    "react": {"chat_id": "C1", "message_id": "m1", "emoji": "+1"},
    "delete": {"chat_id": "C1", "message_id": "m1"},
    "thread_create": {"chat_id": "C1", "thread_name": "topic"},
    "thread_rename": {"chat_id": "C1", "message_id": "T1", "thread_name": "topic 2"},
    "get_chat_info": {"chat_id": "C1"},
}


def action(op: str, **changes: Any) -> dict[str, Any]:
    fields = {**MINIMAL[op], **changes}
    return {"op": op, **{k: v for k, v in fields.items() if v is not DROP}}


DROP = object()


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


async def request(peer: Peer, request_id: str, act: dict[str, Any], **envelope: Any) -> Any:
    await peer.send(line({"type": "outbound", "requestId": request_id, "action": act, **envelope}))
    frame = await peer.frame()
    assert frame["type"] == "outbound_result" and frame["requestId"] == request_id
    return frame["result"]


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

    async with open_connector(outbound_handler=handler) as connector, dial(connector) as peer:
        await peer.handshake("slack")  # no supported_ops: the legacy set
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


# --- tenants -----------------------------------------------------------------------

GUILD_EVENT = {
    "text": "hi bot",
    "message_id": "M1",
    "source": {"platform": "discord", "chat_id": "D1", "scope_id": "G1", "user_id": "U1"},
}


@pytest.mark.parametrize(
    ("metadata", "declined"),
    [
        (None, "and the action carries no metadata.scope_id"),
        ({"user_id": "U1"}, "and the action carries no metadata.scope_id"),
        ({"scope_id": "G2"}, "not 'G2'"),
        ({"scope_id": "G1"}, None),
    ],
)
async def test_egress_to_a_scoped_chat_needs_its_scope(
    metadata: dict[str, str] | None, declined: str | None
) -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake("discord")
        await connector.send_inbound(GUILD_EVENT)
        await peer.frame()
        reply = {"op": "send", "chat_id": "D1", "content": "hello"}
        if metadata is not None:
            reply["metadata"] = metadata
        result = await request(peer, "r1", reply)
        unscoped = await request(peer, "r2", action("send", chat_id="elsewhere"))
    assert unscoped["success"] is True  # a chat without a tenant takes any reply
    if declined is None:
        assert result["success"] is True
        return
    assert result["success"] is False and result["code"] == "egress_declined"
    assert result["error"].startswith("egress declined: chat 'D1' belongs to scope 'G1'")
    assert declined in result["error"]
    assert [str(e) for e in connector.transcript("D1")] == ["U1 #M1: hi bot"]


async def test_legacy_guild_id_is_a_scope_and_the_relay_sees_egress_declined() -> None:
    event = {**GUILD_EVENT, "source": {"platform": "relay", "chat_id": "D1", "guild_id": "G9"}}
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        await connector.send_inbound(event)
        declined = await relay.request(
            {"op": "send", "chat_id": "D1", "content": "x", "metadata": {"scope_id": "nope"}}
        )
        scoped = await relay.request(
            {"op": "send", "chat_id": "D1", "content": "x", "metadata": {"scope_id": "G9"}}
        )
    assert not declined.success and declined.code == "egress_declined"
    assert declined.error is not None and declined.error.startswith("egress declined:")
    assert scoped.success


# --- users, prompts, transcripts ----------------------------------------------------


async def test_say_and_the_transcript() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake("telegram")
        buffer_id = connector.say("C1", "hello", user="U7", user_name="Ada")
        delivered = await peer.frame()
        assert delivered == {
            "type": "inbound",
            "bufferId": buffer_id,
            "event": {
                "text": "hello",
                "message_type": "text",
                "message_id": "u1",
                "source": {
                    "chat_id": "C1",
                    "user_id": "U7",
                    "platform": "telegram",
                    "chat_type": "dm",
                    "user_name": "Ada",
                },
            },
        }
        await request(peer, "r1", {"op": "typing", "chat_id": "C1"})
        await request(peer, "r2", {"op": "send", "chat_id": "C1", "content": "hi Ada"})
        await request(peer, "r3", action("edit", chat_id="C1", message_id="m2", content="hi!"))
        await request(peer, "r4", {"op": "send", "chat_id": "C1"})  # refused: not shown
        connector.say("C1", "bye")  # the same user's chat: platform and name kept
        second = await peer.frame()
    assert second["event"]["source"]["platform"] == "telegram"
    assert connector.transcript_text("C1") == (
        "Ada #u1: hello\nbot typing\nbot send #m2: hi Ada\nbot edit #m2: hi!\nU1 #u2: bye\n"
    )
    entry = connector.transcript("C1")[2]
    assert (entry.direction, entry.kind, entry.text) == ("out", "send", "hi Ada")
    assert connector.transcript("nowhere") == []


async def test_record_false_keeps_no_transcript_but_still_checks_tenants() -> None:
    async with open_connector(record=False) as connector, dial(connector) as peer:
        await peer.handshake("discord")
        await connector.send_inbound(GUILD_EVENT)
        await peer.frame()
        result = await request(peer, "r1", {"op": "send", "chat_id": "D1", "content": "x"})
    assert result["code"] == "egress_declined"
    assert connector.transcript("D1") == []


PROMPT = {
    "op": "prompt",
    "chat_id": "C1",
    "prompt_kind": "approval",
    "prompt_id": "n0nce.0a1b2c3d",
    "content": "Deploy?",
    "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
}


async def test_press_produces_a_prompt_response() -> None:
    descriptors = {"slack": {"supported_ops": ["send", "prompt"]}}
    async with open_connector(descriptors=descriptors) as connector, dial(connector) as peer:
        await peer.handshake("slack")
        connector.say("C1", "deploy please", user="U1", scope_id="T1")
        await peer.frame()
        shown = await request(peer, "r1", {**PROMPT, "metadata": {"scope_id": "T1"}})
        with pytest.raises(LookupError, match=r"no prompt 'other\.00000000'"):
            connector.press("other.00000000", "yes")
        with pytest.raises(ValueError, match="offers yes, no"):
            connector.press("n0nce.0a1b2c3d", "maybe")
        buffer_id = connector.press("n0nce.0a1b2c3d", "yes", user="U2", user_name="Bo")
        pressed = await peer.frame()
    assert pressed["bufferId"] == buffer_id
    event = pressed["event"]
    assert event["text"] == "/yes" and event["message_type"] == "command"
    assert event["prompt_response"] == {
        "prompt_id": "n0nce.0a1b2c3d",
        "option_id": "yes",
        "label": "Yes",
        "prompt_message_id": shown["message_id"],
    }
    assert event["source"]["user_id"] == "U2" and event["source"]["scope_id"] == "T1"
    assert connector.transcript_text("C1").splitlines()[1:] == [
        "bot prompt #m1: Deploy? [yes: Yes] [no: No]",
        "Bo [prompt_response] #u2: /yes",
    ]


async def test_a_press_fans_out_to_sibling_sessions_live() -> None:
    descriptors = {"slack": {"supported_ops": ["send", "prompt"]}}
    async with (
        open_connector(descriptors=descriptors) as connector,
        dial(connector) as sibling,
        dial(connector) as asker,
    ):
        await sibling.handshake("slack")
        await connector.wait_session(1)
        await asker.handshake("slack")
        await connector.wait_session(2)
        await request(asker, "r1", PROMPT)
        buffer_id = connector.press("n0nce.0a1b2c3d", "no")
        buffered = await asker.frame()
        live = await sibling.frame()
    assert buffered["bufferId"] == buffer_id
    assert "bufferId" not in live  # a sibling's copy is live: nothing to ack
    assert live["event"] == buffered["event"]


# --- the entry points --------------------------------------------------------------


def test_open_and_serve_connector_take_one_set_of_options() -> None:
    options = inspect.signature(open_connector).parameters
    served = inspect.signature(serve_connector).parameters
    assert {"secrets", "descriptors", "validate", "on_frame", "host", "port"} <= set(options)
    assert set(served) == set(options) | {"task_status"}
    with pytest.raises(TypeError):
        open_connector(secret={"gw": "s"})  # type: ignore[call-arg]


async def test_serve_connector_takes_the_same_keywords() -> None:
    async with trio.open_nursery() as nursery:
        connector: ReferenceConnector = await nursery.start(
            lambda task_status: serve_connector(validate=False, task_status=task_status)
        )
        assert connector.options.validate is False
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.send(outbound("r1", "teleport"))
            assert (await peer.frame())["result"]["success"] is True
        nursery.cancel_scope.cancel()


async def test_on_frame_sees_both_directions() -> None:
    seen: list[tuple[str, str]] = []
    async with (
        open_connector(on_frame=lambda s, d, f: seen.append((d, f.TYPE))) as connector,
        dial(connector) as peer,
    ):
        await peer.send(hello("slack"), outbound("r1"))
        await peer.frames(2)
    assert seen == [
        ("in", "hello"),
        ("out", "descriptor"),
        ("in", "outbound"),
        ("out", "outbound_result"),
    ]


async def test_keyboard_interrupt_in_the_block_comes_out_as_itself() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        async with open_connector():
            raise KeyboardInterrupt
    assert type(info.value) is KeyboardInterrupt


async def test_keyboard_interrupt_in_a_session_task_comes_out_as_itself() -> None:
    async def handler(session: Any, frame: Any) -> dict[str, Any]:
        raise KeyboardInterrupt  # as if Ctrl-C landed while this task ran

    with pytest.raises(KeyboardInterrupt) as info:
        async with open_connector(outbound_handler=handler) as connector, dial(connector) as peer:
            await peer.handshake()
            await peer.send(outbound("r1"))
            await trio.sleep_forever()
    assert type(info.value) is KeyboardInterrupt


async def test_on_session_sees_opens_closes_and_refusals() -> None:
    seen: list[tuple[int, str, int | None, str | None]] = []

    def watch(session: Any, event: str) -> None:
        seen.append((session.index, event, session.close_code, session.refused))

    async with open_connector(on_session=watch) as connector:
        connector.refuse_upgrades(1, 4401, "provisioning")
        async with dial(connector) as peer:
            assert await peer.closed() == (4401, "provisioning")
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.ws.aclose(1000, "bye")
        await connector.wait_until(lambda: len(seen) == 3)
    assert seen == [
        (0, "closed", 4401, "provisioning"),
        (1, "open", None, None),
        (1, "closed", 1000, None),
    ]
