"""The reference connector's chats: tenant scopes on egress, users who say things,
prompt presses, and the transcript of what each chat saw.

On real loopback sockets, through a raw gateway that sends exactly what each test
writes (the relay itself where what it sees is the point).
"""

from __future__ import annotations

import pytest
from connector_ops_support import GUILD_EVENT, action, request
from connector_support import dial

import trio_relay
from trio_relay.testing import open_connector

# --- tenants -----------------------------------------------------------------------


DISCORD_DECLINE = (
    "discord egress declined: target is not an approved destination for this connection"
)


@pytest.mark.parametrize(
    ("metadata", "declined"),
    [
        (None, True),
        ({"user_id": "U1"}, True),
        ({"scope_id": "G2"}, True),
        ({"scope_id": "G1"}, False),
    ],
)
async def test_egress_to_a_scoped_chat_needs_its_scope(
    metadata: dict[str, str] | None, declined: bool
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
    if not declined:
        assert result["success"] is True
        return
    # The real connector's uniform text: the platform, the marker, and nothing about
    # the tenant (so a gateway learns nothing about another's chats).
    assert result == {"success": False, "code": "egress_declined", "error": DISCORD_DECLINE}
    assert [str(e) for e in connector.transcript("D1")] == ["U1 #M1: hi bot"]


async def test_legacy_guild_id_is_a_scope_and_the_relay_sees_egress_declined() -> None:
    event = {**GUILD_EVENT, "source": {"platform": "relay", "chat_id": "D1", "guild_id": "G9"}}
    # Unlatched: the second request goes out although the first was declined.
    config = trio_relay.RelayConfig(latch_declines=False)
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(5)
        await connector.send_inbound(event)
        declined = await relay.request(
            {"op": "send", "chat_id": "D1", "content": "x", "metadata": {"scope_id": "nope"}}
        )
        scoped = await relay.request(
            {"op": "send", "chat_id": "D1", "content": "x", "metadata": {"scope_id": "G9"}}
        )
    assert not declined.success and declined.code == "egress_declined"
    assert declined.error == (
        "relay egress declined: target is not an approved destination for this connection"
    )
    assert scoped.success


@pytest.mark.parametrize("with_code", [True, False], ids=["coded", "text-only"])
async def test_a_chat_declined_on_purpose_is_declined_as_the_real_connector_does(
    with_code: bool,
) -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake("discord")
        connector.decline_egress("D1", with_code=with_code)
        declined = await request(peer, "r1", action("send", chat_id="D1"))
        typing = await request(peer, "r2", action("typing", chat_id="D1"))
        elsewhere = await request(peer, "r3", action("send", chat_id="D2"))
        connector.allow_egress("D1")
        allowed = await request(peer, "r4", action("send", chat_id="D1"))
    coded = {"code": "egress_declined"} if with_code else {}
    assert declined == typing == {"success": False, **coded, "error": DISCORD_DECLINE}
    assert elsewhere["success"] is True and allowed["success"] is True


async def test_auto_thread_opens_a_thread_of_the_chats_tenant() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake("discord")
        await connector.send_inbound(GUILD_EVENT)
        await peer.frame()
        connector.auto_thread("D1")
        scoped = {"scope_id": "G1"}
        opened = await request(peer, "r1", action("send", chat_id="D1", metadata=scoped))
        in_thread = action("send", chat_id=opened["thread_id"], metadata=scoped)
        reply = await request(peer, "r2", in_thread)
        unscoped = await request(peer, "r3", action("send", chat_id=opened["thread_id"]))
    assert opened["success"] and opened["thread_id"] and opened["auto_thread_name"]
    assert reply["success"] is True and "thread_id" not in reply  # a thread's own send
    assert unscoped["code"] == "egress_declined"  # the thread has its parent's tenant


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
