"""Stop means stop: a user's ``interrupt_inbound`` cancels that chat's running turn
(``RelayConfig.interrupt_cancels_turn``), against the reference connector over loopback,
each race under ``MockClock(autojump_threshold=0)``.

The user presses stop with ``connector.press_stop(chat_id)``. What the user sees is read
from the connector's transcript; what the relay did from its stats and its acks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from live_support import Wire

from trio_relay import (
    Identity,
    MessageEvent,
    Relay,
    RelayConfig,
    StreamReply,
    TaskChunk,
    open_relay,
)
from trio_relay.testing import JsonObject, ReferenceConnector, live_descriptor, open_connector

Handler = Callable[[MessageEvent, Relay], Awaitable[None]]
LIVE = live_descriptor(task_cards=True)  # slack: the stream is the message, sealed
EDITS = live_descriptor(drafts=False)


@asynccontextmanager
async def agent(
    on_message: Handler,
    *,
    descriptor: JsonObject = LIVE,
    on_interrupt: Callable[[str, str], Awaitable[None]] | None = None,
    **config: Any,
) -> AsyncIterator[tuple[ReferenceConnector, Relay, Wire]]:
    wire = Wire()
    async with (
        open_connector(descriptors={"slack": descriptor}, on_frame=wire.observe) as connector,
        open_relay(
            connector.url,
            identities=[Identity("slack", "B1")],
            on_message=on_message,
            on_interrupt=on_interrupt,
            config=RelayConfig(**config),
        ) as relay,
    ):
        await relay.wait_connected(5)
        yield connector, relay, wire


def shown(connector: ReferenceConnector, kind: str, text: str | None = None) -> bool:
    """Whether the chat shows an entry of ``kind`` (with ``text``, when given)."""
    return any(
        e.kind == kind and (text is None or e.text == text) for e in connector.transcript("C1")
    )


def kinds(connector: ReferenceConnector, chat_id: str) -> list[tuple[str, str | None]]:
    """The chat as its users see it: (kind, text) of each entry, typing left out."""
    return [(e.kind, e.text) for e in connector.transcript(chat_id) if e.kind != "typing"]


async def test_stop_unwinds_the_turn_by_structure(autojump_clock: trio.testing.MockClock) -> None:
    # A model streaming into a live card under a task card, stopped mid-token: the card
    # is sealed with what it showed, the task card stopped, typing over, the delivery
    # acked as handled, and the handler knows it was the user's stop.
    seen: dict[str, Any] = {}

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        chat_id = event.source.chat_id
        assert chat_id is not None
        try:
            async with (
                relay.task_card(chat_id, reply_to=event.message_id) as card,
                relay.stream_reply(chat_id, reply_to=event.message_id) as reply,
            ):
                seen["card"], seen["reply"] = card, reply
                await card.update([TaskChunk("t1", "Write", "in_progress")])
                await reply.write("The answer")
                await trio.sleep(1)
                await reply.write(" goes on")
                await trio.sleep_forever()  # the model never finishes
        except trio.Cancelled:
            seen["cancelled"] = True
            raise
        finally:
            seen["interrupted"] = relay.interrupted(chat_id)

    async with agent(on_message) as (connector, relay, wire):
        buffer_id = connector.say("C1", "write an essay")
        await connector.wait_until(lambda: shown(connector, "draft"))
        await trio.sleep(2)  # both drafts on screen
        stopped_at = trio.current_time() - wire.t0
        assert connector.press_stop("C1")
        await connector.wait_acks(1)
        assert connector.acks == [buffer_id] and not connector.pending()
        assert relay.stats.turns_interrupted == 1 and relay.stats.delivered == 1
        assert relay.stats.handler_failures == 0
        assert not relay.interrupted("C1")  # the turn is over
    assert seen["cancelled"] and seen["interrupted"]
    reply: StreamReply = seen["reply"]
    assert kinds(connector, "C1")[-3:] == [
        ("stop", None),
        ("seal", "The answer goes on"),
        ("task_card_stop", None),
    ]
    assert reply.outcome is not None and reply.outcome.success and reply.message_ids
    assert seen["card"].stopped is not None and seen["card"].stopped.success
    # Typing ended with the turn: none after the stop.
    assert [t for t, _ in wire.timed("typing") if t > stopped_at] == []


async def test_only_the_stopped_chat_s_turn_ends(autojump_clock: trio.testing.MockClock) -> None:
    finished: list[str] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        await trio.sleep(10)
        finished.append(f"{event.source.chat_id}:{event.text}")

    async with agent(on_message) as (connector, relay, _wire):
        connector.say("C1", "first")
        connector.say("C2", "other chat")
        connector.say("C1:thread", "a chat whose id only starts with C1")
        await trio.sleep(1)
        connector.press_stop("C1")
        await trio.sleep(1)
        connector.say("C1", "later")  # after the stop: a turn of its own
        await connector.wait_acks(4)
        assert relay.stats.turns_interrupted == 1
    assert sorted(finished) == [
        "C1:later", "C1:thread:a chat whose id only starts with C1", "C2:other chat"
    ]


async def test_a_stop_before_the_turn_started_leaves_the_queued_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The one handler slot is busy with C0; C1's message waits for it when the user
    # presses stop in C1. Nothing ran there to stop: the message runs when its turn comes.
    gate = trio.Event()
    handled: list[tuple[str | None, bool]] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        if event.source.chat_id == "C0":
            await gate.wait()
        await trio.sleep(1)
        handled.append((event.text, relay.interrupted(event.source.chat_id or "")))

    async with agent(on_message, max_concurrent_handlers=1) as (connector, relay, _wire):
        connector.say("C0", "busy")
        await trio.sleep(0.5)
        connector.say("C1", "queued")
        await trio.sleep(0.5)
        connector.press_stop("C1")
        await trio.sleep(0.5)
        gate.set()
        await connector.wait_acks(2)
        assert relay.stats.turns_interrupted == 0
    assert handled == [("busy", False), ("queued", False)]


async def test_a_stop_after_the_turn_ended_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handled: list[str | None] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        await trio.sleep(1)
        handled.append(event.text)

    async with agent(on_message) as (connector, relay, _wire):
        connector.say("C1", "one")
        await connector.wait_acks(1)
        connector.press_stop("C1")
        await trio.sleep(1)
        connector.say("C1", "two")
        await connector.wait_acks(2)
        assert relay.stats.turns_interrupted == 0 and relay.stats.delivered == 2
    assert handled == ["one", "two"]


async def test_two_stops_cancel_once(autojump_clock: trio.testing.MockClock) -> None:
    cancels: list[float] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancels.append(trio.current_time())
            # A short epilogue, shielded the Trio way; a second stop lands during it.
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await trio.sleep(1)
                await relay.send_text("C1", "Stopped.")
            raise

    async with agent(on_message) as (connector, relay, _wire):
        connector.say("C1", "go")
        await trio.sleep(1)
        connector.press_stop("C1")
        await trio.sleep(0.5)
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert relay.stats.turns_interrupted == 1 and relay.stats.delivered == 1
    assert len(cancels) == 1
    assert kinds(connector, "C1") == [("text", "go"), ("stop", None), ("stop", None),
                                      ("send", "Stopped.")]


async def test_a_stop_with_two_queued_messages_keeps_the_chat_s_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: list[str | None] = []
    finished: list[str | None] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        started.append(event.text)
        await trio.sleep(5)
        finished.append(event.text)

    async with agent(on_message) as (connector, relay, _wire):
        for text in ("one", "two", "three"):
            connector.say("C1", text)
        await trio.sleep(1)  # "one" runs, "two" and "three" wait in the chat's lane
        connector.press_stop("C1")
        await connector.wait_acks(3)
        assert relay.stats.turns_interrupted == 1 and relay.stats.delivered == 3
    assert started == ["one", "two", "three"]
    assert finished == ["two", "three"]
    assert [e.text for e in connector.transcript("C1") if e.kind == "text"] == [
        "one", "two", "three"
    ]


@pytest.mark.parametrize(("descriptor", "last"), [(LIVE, "seal"), (EDITS, "edit")])
async def test_a_stop_during_the_last_flush_lets_it_complete(
    autojump_clock: trio.testing.MockClock, descriptor: JsonObject, last: str
) -> None:
    # The handler has left its stream_reply block: the seal (or the last edit) is out,
    # its result slow, when the stop lands. It completes, within close_timeout, and the
    # reply knows its message.
    replies: list[StreamReply] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        async with relay.stream_reply(event.source.chat_id or "") as reply:
            replies.append(reply)
            await reply.write("Short")
            await trio.sleep(2)
            await reply.write(" answer")
            delayed.set()

    delayed = trio.Event()

    async with agent(on_message, descriptor=descriptor) as (connector, relay, wire):
        connector.say("C1", "hi")
        await delayed.wait()
        connector.delay_results(0.5)
        await connector.wait_until(lambda: shown(connector, last, "Short answer"))
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert relay.stats.turns_interrupted == 1
    reply = replies[0]
    assert (last, "Short answer") in kinds(connector, "C1")
    # Every frame of the reply has its outcome, the last one included.
    assert len(reply.outcomes) == len(wire.ops()) and all(o.success for o in reply.outcomes)
    assert reply.outcome is not None and reply.outcome.success


async def test_the_last_flush_is_bounded_by_close_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[float] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        try:
            async with relay.stream_reply("C1") as reply:
                await reply.write("Short answer")
                await trio.sleep(2)
                connector.delay_results(30)
        finally:
            ended.append(trio.current_time())

    async with agent(on_message, close_timeout=1.5) as (connector, relay, _wire):
        connector.say("C1", "hi")
        await connector.wait_until(lambda: shown(connector, "seal"))
        stopped = trio.current_time()
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert relay.stats.turns_interrupted == 1
    assert ended[0] - stopped == pytest.approx(1.5)


async def test_with_an_on_interrupt_the_relay_cancels_only_if_told(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[tuple[str, str]] = []

    async def on_interrupt(session_key: str, chat_id: str) -> None:
        calls.append((session_key, chat_id))

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        await trio.sleep(10)

    async with agent(on_message, on_interrupt=on_interrupt) as (connector, relay, _wire):
        connector.say("C1", "go")
        await trio.sleep(1)
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert trio.current_time() >= 10  # ran to its end: the handler decides
        assert relay.stats.turns_interrupted == 0
    assert calls == [("slack:C1", "C1")]
    calls.clear()
    told = {"on_interrupt": on_interrupt, "interrupt_cancels_turn": True}
    async with agent(on_message, **told) as (connector, relay, _wire):
        connector.say("C1", "go")
        await trio.sleep(1)
        began = trio.current_time()
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert trio.current_time() - began < 1
        assert relay.stats.turns_interrupted == 1
    assert calls == [("slack:C1", "C1")]


async def test_interrupt_cancels_turn_false_leaves_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def on_message(event: MessageEvent, relay: Relay) -> None:
        await trio.sleep(10)

    async with agent(on_message, interrupt_cancels_turn=False) as (connector, relay, _wire):
        connector.say("C1", "go")
        await trio.sleep(1)
        connector.press_stop("C1")
        await connector.wait_acks(1)
        assert trio.current_time() >= 10
        assert relay.stats.turns_interrupted == 0


async def test_a_handler_that_raises_while_stopping_is_not_retried(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        runs.append(event.attempt)
        try:
            await trio.sleep_forever()
        finally:
            raise RuntimeError("cleanup went wrong")

    async with agent(on_message) as (connector, relay, _wire):
        connector.say("C1", "go")
        await trio.sleep(1)
        connector.press_stop("C1")
        await connector.wait_acks(1)
        await trio.sleep(30)  # no retry comes
        assert relay.stats.turns_interrupted == 1 and relay.stats.handler_failures == 0
    assert runs == [1]
    assert "raised while stopping; not retried" in caplog.text


async def test_a_stop_with_no_gateway_is_dropped_and_in_the_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector:
        assert connector.press_stop("C1", user_name="Ada") is False
        assert [str(e) for e in connector.transcript("C1")] == ["Ada [stop]"]
