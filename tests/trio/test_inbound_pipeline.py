"""InboundPipeline driven directly (see ``inbound_support``): handled once and acked after
handoff, dedupe keys from the wire, ordering, concurrency, passthrough. Overload:
``test_inbound_overload.py``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing
from inbound_support import (
    Recorder,
    Wire,
    interrupt,
    msg,
    passthrough,
    running,
    settle,
)

from trio_relay._core.event import MessageEvent
from trio_relay._core.passthrough import PassthroughForward

# --- handled once, acked after handoff -------------------------------------------------


async def test_handled_once_and_acked_only_after_the_handler_returned() -> None:
    rec = Recorder()
    rec.gate = trio.Event()
    async with running(on_message=rec) as h:
        rec.harness = h
        h.feed(msg(buffer="b1"))
        await settle()
        assert len(rec.seen) == 1
        assert h.acks == []  # the handler has not returned yet
        rec.gate.set()
        await settle()
        assert h.acks == ["b1"]
        assert h.stats.delivered == 1
        # The connector replays it (the ack was lost, say): dropped, acked again.
        h.feed(msg(buffer="b1"))
        await settle()
        assert len(rec.seen) == 1
        assert h.acks == ["b1", "b1"]
        assert h.stats.replays_dropped == 1


async def test_copy_of_in_flight_delivery_is_dropped_without_ack() -> None:
    rec = Recorder()
    rec.gate = trio.Event()
    async with running(on_message=rec) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        h.feed(msg(buffer="b1"), msg(buffer="b1-again"))  # replays while in progress
        await settle()
        assert h.acks == [] and h.stats.replays_dropped == 2
        rec.gate.set()
        await settle()
        assert len(rec.seen) == 1
        assert h.acks == ["b1"]  # the one in flight acks; the rest are replayed later


async def test_copy_of_queued_delivery_is_dropped() -> None:
    # The original waits behind another message of its chat; the copy must not be
    # queued a second time (a replay storm would otherwise fill the queue).
    rec = Recorder()
    rec.gate = trio.Event()
    async with running(on_message=rec) as h:
        h.feed(msg(mid="first", buffer="b0"), msg(mid="m1", buffer="b1"))
        await settle()
        h.feed(msg(mid="m1", buffer="b1"))
        assert h.stats.queue_depth == 1
        rec.gate.set()
        await settle()
        assert rec.keys == ["slack:C1:first", "slack:C1:m1"]
        assert h.acks == ["b0", "b1"]


async def test_acks_are_fire_and_forget_when_disconnected() -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.connected = False
        h.feed(msg(buffer="b1"))
        await settle()
        assert h.acks == [] and h.stats.delivered == 1
        h.connected = True  # next connection: the connector replays it
        h.feed(msg(buffer="b1"))
        await settle()
        assert len(rec.seen) == 1 and h.acks == ["b1"]


async def test_live_delivery_is_not_acked() -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(msg())
        await settle()
        assert len(rec.seen) == 1 and h.acks == []


# --- dedupe keys, from the wire ----------------------------------------------------------


async def test_platforms_never_collide() -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(msg("slack", "C1", "m1"), msg("discord", "C1", "m1"), msg("telegram", "C1", "m1"))
        await settle()
        assert len(rec.seen) == 3


async def test_colons_in_ids_do_not_conflate() -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(msg("matrix", "!a:b", "c"), msg("matrix", "!a", "b:c"))
        await settle()
        assert len(rec.seen) == 2


async def test_one_platform_spelled_differently_is_one_key() -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(msg("slack", buffer="1"))
        await settle()
        h.feed(msg("Slack", buffer="2"), msg(" SLACK ", buffer="3"))
        await settle()
        assert rec.keys == ["slack:C1:m1"]
        assert h.acks == ["1", "2", "3"]  # the copies are acked as replays


async def test_numeric_and_string_ids_are_one_key() -> None:
    # Telegram sends numbers; a replay may have gone through a store that kept text.
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(
            '{"type":"inbound","bufferId":7,"event":{"message_id":42,'
            '"source":{"platform":"telegram","chat_id":-100123}}}\n',
        )
        await settle()
        h.feed(
            '{"type":"inbound","bufferId":"7","event":{"message_id":"42",'
            '"source":{"platform":"telegram","chat_id":"-100123"}}}\n',
        )
        await settle()
        assert rec.keys == ["telegram:-100123:42"]
        assert h.acks == ["7", "7"]


@pytest.mark.parametrize(
    "wire",
    [
        msg(mid=None, buffer="b"),
        msg(chat=None, buffer="b"),
        msg(platform=None, buffer="b"),
        msg(mid="", buffer="b"),
    ],
    ids=["no-message-id", "no-chat-id", "no-platform", "empty-message-id"],
)
async def test_missing_ids_fail_open(wire: Wire) -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        h.feed(wire, wire)
        await settle()
        assert len(rec.seen) == 2  # a repeat beats a lost message
        assert rec.keys == [None, None]
        assert h.acks == ["b", "b"] and h.stats.replays_dropped == 0


# --- ordering and concurrency -----------------------------------------------------------


async def test_same_chat_in_arrival_order_chats_in_parallel(autojump_clock: Any) -> None:
    rng = random.Random(5)
    running_now: set[str] = set()
    active_chats: set[str] = set()
    peak = 0
    order: dict[str, list[int]] = {}

    async def handler(event: MessageEvent) -> None:
        nonlocal peak
        chat = event.source.chat_id
        assert chat is not None
        assert chat not in active_chats, "two handlers of one chat overlapped"
        active_chats.add(chat)
        running_now.add(event.dedupe_key or "")
        peak = max(peak, len(running_now))
        await trio.sleep(rng.random())
        order.setdefault(chat, []).append(int(event.message_id or 0))
        running_now.discard(event.dedupe_key or "")
        active_chats.discard(chat)

    async with running(on_message=handler, max_concurrent_handlers=3) as h:
        h.feed(*[msg(chat=f"C{c}", mid=n) for n in range(8) for c in range(5)])
        await settle()
        await trio.sleep(100)
        assert order == {f"C{c}": list(range(8)) for c in range(5)}
        assert peak == 3  # parallel across chats, never beyond the bound
        assert h.stats.delivered == 40 and h.stats.queue_depth == 0


async def test_submit_never_blocks_with_every_slot_awaiting_a_reply(autojump_clock: Any) -> None:
    # The deadlock of the replaced design: a handler awaiting a reply that only the
    # reader can deliver. Here the "reader" submits more messages than there are slots
    # while every handler waits on a reply, then delivers the replies.
    replies: dict[str, trio.Event] = {}
    done: list[str] = []

    async def handler(event: MessageEvent) -> None:
        key = event.dedupe_key or ""
        replies[key] = trio.Event()
        await replies[key].wait()  # "await relay.request(...)"
        done.append(key)

    async with running(on_message=handler, max_concurrent_handlers=2) as h:
        with trio.fail_after(10):
            h.feed(*[msg(chat=f"C{i}", mid="m") for i in range(10)])  # returns at once
            while len(done) < 10:
                await settle()
                for event in list(replies.values()):
                    event.set()
        assert len(done) == 10


async def test_interrupts_overtake_a_full_queue() -> None:
    rec = Recorder()
    rec.gate = trio.Event()
    stops: list[tuple[str, str]] = []

    async def on_interrupt(session_key: str, chat_id: str) -> None:
        stops.append((session_key, chat_id))

    async with running(on_message=rec, on_interrupt=on_interrupt,
                       max_concurrent_handlers=1, max_inbound_queue=2) as h:
        h.feed(msg(mid="0", buffer="b0"))
        await settle()  # running: it no longer counts as waiting
        h.feed(msg(chat="C2", mid="1", buffer="b1"), msg(chat="C3", mid="2", buffer="b2"),
               msg(chat="C4", mid="3", buffer="b3"))
        await settle()
        assert h.stats.queue_depth == 2 and h.stats.inbound_dropped == 1  # queue full
        h.feed(interrupt("S1", "C1"))
        await settle()
        assert stops == [("S1", "C1")]  # while the only message slot is still taken
        assert len(rec.seen) == 1
        rec.gate.set()


async def test_interrupt_handler_failure_is_counted() -> None:
    async def on_interrupt(session_key: str, chat_id: str) -> None:
        raise RuntimeError("stop failed")

    async with running(on_interrupt=on_interrupt) as h:
        h.feed(interrupt(), interrupt())
        await settle()
        assert h.stats.handler_failures == 2


async def test_interrupt_without_handler_is_ignored() -> None:
    async with running() as h:
        h.feed(interrupt())
        await settle()
        assert h.acks == [] and h.stats.handler_failures == 0


async def test_interrupts_beyond_the_cap_are_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = trio.Event()

    async def on_interrupt(session_key: str, chat_id: str) -> None:
        await gate.wait()

    async with running(on_interrupt=on_interrupt, max_inbound_queue=3) as h:
        h.feed(*[interrupt(f"S{i}") for i in range(5)])
        await settle()
        assert h.stats.inbound_dropped == 2
        assert caplog.text.count("LOST interrupt") == 2
        gate.set()


# --- passthrough ---------------------------------------------------------------------------


async def test_passthrough_acked_after_handler_and_deduped_by_buffer_id() -> None:
    gate = trio.Event()
    seen: list[PassthroughForward] = []

    async def on_passthrough(forward: PassthroughForward) -> None:
        seen.append(forward)
        await gate.wait()

    async with running(on_passthrough=on_passthrough) as h:
        h.feed(passthrough(buffer="p1"))
        await settle()
        assert h.acks == [] and seen[0].body == b"payload=1"
        gate.set()
        await settle()
        assert h.acks == ["p1"]
        h.feed(passthrough(buffer="p1"))  # replay
        await settle()
        assert len(seen) == 1 and h.acks == ["p1", "p1"]


async def test_passthrough_without_buffer_id_fails_open() -> None:
    seen: list[PassthroughForward] = []

    async def on_passthrough(forward: PassthroughForward) -> None:
        seen.append(forward)

    async with running(on_passthrough=on_passthrough) as h:
        h.feed(passthrough(), passthrough())
        await settle()
        assert len(seen) == 2 and h.acks == []


async def test_passthrough_key_cannot_collide_with_a_message_key() -> None:
    rec = Recorder()
    seen: list[PassthroughForward] = []

    async def on_passthrough(forward: PassthroughForward) -> None:
        seen.append(forward)

    async with running(on_message=rec, on_passthrough=on_passthrough) as h:
        h.feed(msg("passthrough", "x", "y", buffer="b"), passthrough(buffer="x:y"))
        await settle()
        assert len(rec.seen) == 1 and len(seen) == 1


async def test_passthrough_failure_is_retried_in_session(autojump_clock: Any) -> None:
    calls = 0

    async def on_passthrough(forward: PassthroughForward) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("first try fails")

    async with running(on_passthrough=on_passthrough) as h:
        h.feed(passthrough(buffer="p1"))
        await settle()
        assert h.acks == []
        await trio.sleep(1)
        assert calls == 2 and h.acks == ["p1"]
