"""The decline latch (docs/protocol.md, "Egress declines"), against the reference
connector over loopback: after a definite decline of content, a chat's content requests
are answered at once with no frame, until an inbound message of that chat is handed to
the handler; typing and delete pass; chat ids are strings, never split on ``:``; a
thread the connector opened is latched with its chat; ``follow_up`` is not latched;
``RelayConfig(latch_declines=False)`` sends everything."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_relay import Identity, MessageEvent, Relay, RelayConfig, TaskChunk, open_relay
from trio_relay.testing import ReferenceConnector, live_descriptor, open_connector

DEADLINE = 10
EVERY_OP = {
    "slack": live_descriptor(
        task_cards=True, extra_ops=("prompt", "send_media", "delete", "react", "thread_create")
    )
}
SLACK_DECLINE = (
    "slack egress declined: target is not an approved destination for this connection"
)


@asynccontextmanager
async def latching(
    config: RelayConfig | None = None,
) -> AsyncIterator[tuple[ReferenceConnector, Relay, list[MessageEvent]]]:
    handled: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        handled.append(event)

    with trio.fail_after(DEADLINE):
        async with (
            open_connector(descriptors=EVERY_OP) as connector,
            open_relay(
                connector.url,
                identities=[Identity("slack", "B1")],
                on_message=on_message,
                config=config,
            ) as relay,
        ):
            await relay.wait_connected(DEADLINE)
            yield connector, relay, handled


def send(chat_id: Any, content: str = "hi") -> dict[str, Any]:
    return {"op": "send", "chat_id": chat_id, "content": content}


def content_frames(connector: ReferenceConnector) -> int:
    return sum(frame.action["op"] != "typing" for frame in connector.outbound)


async def handled_count(relay: Relay, count: int) -> None:
    while relay.stats.delivered < count:
        await trio.sleep(0.005)


async def test_after_a_decline_the_chats_content_is_answered_at_once_without_a_frame(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_relay")
    async with latching() as (connector, relay, _handled):
        connector.decline_egress("C1")
        declined = await relay.request(send("C1"))
        frames = connector.outbound_count
        content = [
            send("C1", "again"),
            {"op": "edit", "chat_id": "C1", "message_id": "m1", "content": "x"},
            {"op": "draft", "chat_id": "C1", "draft_id": 9, "content": "x", "final": False},
            {"op": "draft", "chat_id": "C1", "draft_id": 9, "content": "x", "final": True},
            {"op": "send_media", "chat_id": "C1", "media_kind": "image", "source_url": "u"},
            {"op": "task_card", "chat_id": "C1", "card_id": "c", "chunks": []},
        ]
        latched = [await relay.request(action) for action in content]
        latched += await relay.send_text("C1", "more text")
        async with relay.task_card("C1") as card:
            latched.append(await card.update([TaskChunk("t1", "Search", "in_progress")]))
        latched_ask = await relay.ask("C1", "Deploy?", [("y", "Yes")], timeout=1)
        assert connector.outbound_count == frames  # not one more content frame
        other = await relay.request(send("C2"))  # another chat is not latched
        health = relay.health()
    assert declined.egress_declined and declined.code == "egress_declined"
    assert declined.error == SLACK_DECLINE and not declined.ambiguous
    assert all(o.code == "egress_declined" and o.egress_declined for o in latched)
    assert all(not o.success and not o.ambiguous for o in latched)
    error = latched[0].error or ""
    assert "chat 'C1' is latched" in error and SLACK_DECLINE in error
    assert "inbound message" in error and "latch_declines=False" in error
    assert latched_ask is None and other.success
    assert health.latched_chats == ("C1",) and health.ready
    # The prompt is latched as well; the stop of a card that never showed is not sent.
    assert relay.stats.requests_latched == len(latched) + 1
    assert relay.stats.declines_latched == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "latch" in r.msg]
    assert len(warnings) == 1  # one per latch, not one per request


async def test_typing_and_delete_pass_a_latch_and_do_not_lift_it() -> None:
    async with latching() as (connector, relay, _handled):
        connector.say("C1", "hi")
        await handled_count(relay, 1)
        connector.decline_egress("C1")
        assert (await relay.request(send("C1"))).egress_declined
        connector.allow_egress("C1")  # the connector would take anything now
        frames = connector.outbound_count
        typing = await relay.typing("C1")
        delete = await relay.request({"op": "delete", "chat_id": "C1", "message_id": "m1"})
        assert connector.outbound_count == frames + 2  # both went out
        still = await relay.request(send("C1"))
        assert connector.outbound_count == frames + 2
    assert typing.success and delete.success
    assert still.code == "egress_declined" and relay.stats.requests_latched == 1


async def test_only_an_admitted_inbound_lifts_the_latch() -> None:
    async with latching() as (connector, relay, handled):
        first = {
            "text": "hi",
            "message_id": "first",
            "source": {"platform": "slack", "chat_id": "C1", "user_id": "U1"},
        }
        connector.buffer_inbound(first)
        await handled_count(relay, 1)
        connector.decline_egress("C1")
        assert (await relay.request(send("C1"))).egress_declined
        connector.allow_egress("C1")
        acks = len(connector.acks)
        # A copy the dedupe drops and a sibling gateway's press (consumed at submit)
        # are frames of that chat that never reach the handler: the latch stays.
        connector.buffer_inbound(first)
        press = {
            "text": "/y",
            "message_type": "command",
            "message_id": "press",
            "source": {"platform": "slack", "chat_id": "C1", "user_id": "U1"},
            "prompt_response": {"prompt_id": "sibling.0000abcd", "option_id": "y"},
        }
        connector.buffer_inbound(press)
        await connector.wait_acks(acks + 2)
        assert relay.health().latched_chats == ("C1",)
        assert (await relay.request(send("C1"))).code == "egress_declined"
        connector.say("C1", "are you there?")  # handed to the handler: lifts it
        while len(handled) < 2:
            await trio.sleep(0.005)
        assert relay.health().latched_chats == ()
        answered = await relay.request(send("C1", "yes"))
    assert answered.success and [e.text for e in handled] == ["hi", "are you there?"]


@pytest.mark.parametrize(
    ("declined", "same", "other"),
    [
        ("!room:example.org", "!room:example.org", "!room"),  # Matrix ids have colons
        ("example.org", "example.org", "!room:example.org"),
        ("12345", 12345, "1234"),  # a numeric id and its text are one chat
    ],
)
async def test_chat_ids_are_strings_never_split_on_colons(
    declined: str, same: Any, other: str
) -> None:
    async with latching() as (connector, relay, _handled):
        connector.decline_egress(declined)
        assert (await relay.request(send(declined))).egress_declined
        connector.allow_egress(declined)
        latched = await relay.request(send(same))
        sent = await relay.request(send(other))
        assert relay.health().latched_chats == (declined,)
    assert latched.code == "egress_declined" and relay.stats.requests_latched == 1
    assert sent.success


async def test_a_thread_the_connector_opened_is_latched_with_its_chat_a_users_is_not() -> None:
    async with latching() as (connector, relay, _handled):
        connector.say("C1", "hi")
        await handled_count(relay, 1)
        connector.auto_thread("C1")
        opened = await relay.request(send("C1", "a reply that opens a thread"))
        thread = opened.result["thread_id"]
        connector.auto_thread("C1", False)
        user_thread = {"platform": "slack", "chat_id": "U-T1", "parent_chat_id": "C1"}
        await connector.send_inbound(
            {"text": "t", "message_id": "in-user-thread", "source": user_thread}
        )
        await handled_count(relay, 2)
        connector.decline_egress("C1")
        assert (await relay.request(send("C1"))).egress_declined
        in_thread = await relay.request(send(thread))
        in_users_thread = await relay.request(send("U-T1"))
        health = relay.health()
        # The thread's own inbound is its chat's: it lifts the one latch of both.
        connector.allow_egress("C1")
        bot_thread = {"platform": "slack", "chat_id": thread}
        await connector.send_inbound(
            {"text": "back", "message_id": "in-bot-thread", "source": bot_thread}
        )
        await handled_count(relay, 3)
        lifted = await relay.request(send("C1"))
    assert in_thread.code == "egress_declined"
    assert f"thread {thread!r} (opened by the connector in chat 'C1')" in (in_thread.error or "")
    assert in_users_thread.success
    assert health.latched_chats == ("C1",) and lifted.success


async def test_follow_up_is_not_latched_and_hands_back_the_structured_decline() -> None:
    async def decline_follow_ups(_session: Any, frame: Any) -> dict[str, Any]:
        if frame.action["op"] == "follow_up":  # an older connector: the text alone
            return {"success": False, "error": "Discord egress declined: target is not approved"}
        return {"success": True, "message_id": "m1"}

    with trio.fail_after(DEADLINE):
        async with (
            open_connector(outbound_handler=decline_follow_ups) as connector,
            open_relay(connector.url) as relay,
        ):
            await relay.wait_connected(DEADLINE)
            follow_up = {"op": "follow_up", "session_key": "s1", "kind": "k", "content": "c"}
            outcomes = [await relay.request(follow_up) for _ in range(2)]
            assert connector.outbound_count == 2  # both went out
            assert relay.health().latched_chats == ()
    assert all(o.egress_declined and o.code == "egress_declined" for o in outcomes)
    assert relay.stats.declines_latched == 0


async def test_a_text_only_decline_latches_too() -> None:
    async with latching() as (connector, relay, _handled):
        connector.decline_egress("C1", with_code=False)
        declined = await relay.request(send("C1"))
        frames = connector.outbound_count
        latched = await relay.request(send("C1"))
        assert connector.outbound_count == frames
    assert declined.result == {"success": False, "error": SLACK_DECLINE}
    assert declined.code == "egress_declined" and latched.code == "egress_declined"


async def test_latch_declines_false_sends_every_request() -> None:
    async with latching(RelayConfig(latch_declines=False)) as (connector, relay, _handled):
        connector.decline_egress("C1")
        outcomes = [await relay.request(send("C1")) for _ in range(3)]
        assert connector.outbound_count == 3
        health = relay.health()
    assert all(o.egress_declined and o.error == SLACK_DECLINE for o in outcomes)
    assert health.latched_chats == () and relay.stats.declines_latched == 0


async def test_a_declined_stream_reply_stops_and_its_next_reply_sends_nothing() -> None:
    async with latching() as (connector, relay, _handled):
        connector.decline_egress("C1")
        async with relay.stream_reply("C1") as first:
            await first.write("Hello")
        frames = content_frames(connector)
        async with relay.stream_reply("C1") as second:
            await second.write("Hello again")
        assert content_frames(connector) == frames  # typing went out, nothing else
    assert first.failed is not None and first.failed.error == SLACK_DECLINE
    assert second.failed is not None and second.failed.code == "egress_declined"
