"""InboundPipeline driven directly, fed frames decoded from raw connector JSON lines.

Every delivery here goes through ``FrameDecoder(CONNECTOR_FRAMES)`` and the pipeline's
own ``MessageEvent.from_wire``: the dedupe sees exactly what the wire carries, never a
hand-built event. Timed tests run under the autojump clock.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_relay._core.codec import FrameDecoder, RejectedFrame
from trio_relay._core.config import RelayConfig
from trio_relay._core.event import MessageEvent
from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    FrameError,
    InboundFrame,
    InterruptInbound,
    PassthroughFrame,
)
from trio_relay._core.passthrough import PassthroughForward
from trio_relay._core.stats import RelayStats
from trio_relay._trio import dedupe_writer as _dedupe_writer
from trio_relay._trio.dedupe_store import SqliteDedupeStore
from trio_relay._trio.inbound import LIVE_OVERFLOW_FACTOR, DeadLetter, InboundPipeline

Wire = dict[str, Any]


def msg(
    platform: str | None = "slack",
    chat: str | int | None = "C1",
    mid: str | int | None = "m1",
    *,
    buffer: str | int | None = None,
    text: str = "hi",
) -> Wire:
    """An ``inbound`` frame as the connector writes it (absent fields left out)."""
    source: Wire = {"user_id": "U1"}
    if platform is not None:
        source["platform"] = platform
    if chat is not None:
        source["chat_id"] = chat
    event: Wire = {"text": text, "source": source}
    if mid is not None:
        event["message_id"] = mid
    frame: Wire = {"type": "inbound", "event": event}
    if buffer is not None:
        frame["bufferId"] = buffer
    return frame


def passthrough(buffer: str | None = None, body: bytes = b"payload=1") -> Wire:
    import base64

    frame: Wire = {
        "type": "passthrough_forward",
        "forward": {
            "platform": "slack", "botId": "B1", "method": "POST", "path": "/slack/commands",
            "headers": [["X-Slack-Signature", "v0=secret-sig"]],
            "bodyB64": base64.b64encode(body).decode(),
        },
    }
    if buffer is not None:
        frame["bufferId"] = buffer
    return frame


def interrupt(session: str = "S1", chat: str = "C1") -> Wire:
    return {"type": "interrupt_inbound", "session_key": session, "chat_id": chat}


@dataclass
class Harness:
    pipeline: InboundPipeline
    stats: RelayStats
    acks: list[str] = field(default_factory=list)
    connected: bool = True
    decoder: FrameDecoder = field(default_factory=lambda: FrameDecoder(CONNECTOR_FRAMES))
    nursery: trio.Nursery | None = None

    async def start(self) -> None:
        """Start ``pipeline.run`` (for harnesses opened with ``start=False``)."""
        assert self.nursery is not None
        await self.nursery.start(self.pipeline.run)

    def send_ack(self, buffer_id: str) -> bool:
        if not self.connected:
            return False
        self.acks.append(buffer_id)
        return True

    def feed(self, *wire: Wire | str) -> None:
        """Decode raw JSON lines (objects are serialised first) and submit each frame,
        as the reader does: synchronously."""
        payload = "".join(w if isinstance(w, str) else json.dumps(w) + "\n" for w in wire)
        for frame in self.decoder.feed(payload):
            assert not isinstance(frame, RejectedFrame), frame
            assert isinstance(frame, (InboundFrame, PassthroughFrame, InterruptInbound))
            self.pipeline.submit(frame)


@asynccontextmanager
async def running(
    *,
    on_message: Callable[[MessageEvent], Awaitable[None]] | None = None,
    on_interrupt: Callable[[str, str], Awaitable[None]] | None = None,
    on_passthrough: Callable[[PassthroughForward], Awaitable[None]] | None = None,
    on_dead_letter: Callable[[DeadLetter], Awaitable[None]] | None = None,
    start: bool = True,
    **config: Any,
) -> AsyncIterator[Harness]:
    stats = RelayStats()
    def send_ack(buffer_id: str) -> bool:
        return h.send_ack(buffer_id)

    pipeline = InboundPipeline(
        config=RelayConfig(**config), stats=stats, on_message=on_message,
        on_interrupt=on_interrupt, on_passthrough=on_passthrough,
        on_dead_letter=on_dead_letter, send_ack=send_ack,
    )
    h = Harness(pipeline=pipeline, stats=stats)
    async with trio.open_nursery() as nursery:
        h.nursery = nursery
        if start:
            await h.start()
        yield h
        nursery.cancel_scope.cancel()


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll (real clock): for tests that wait on worker threads (the durable store)."""
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.005)


class Recorder:
    """An on_message handler that records dedupe keys and can be told to fail/block."""

    def __init__(self) -> None:
        self.seen: list[MessageEvent] = []
        self.fail_next = 0
        self.gate: trio.Event | None = None
        self.acks_at_call: list[list[str]] = []
        self.harness: Harness | None = None

    async def __call__(self, event: MessageEvent) -> None:
        self.seen.append(event)
        if self.harness is not None:
            self.acks_at_call.append(list(self.harness.acks))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("handler broke")

    @property
    def keys(self) -> list[str | None]:
        return [e.dedupe_key for e in self.seen]


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


# --- failures, retries, dead letters ----------------------------------------------------


async def test_handler_raises_then_redelivery_is_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorder()
    rec.fail_next = 1
    async with running(on_message=rec) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        assert h.acks == [] and h.stats.handler_failures == 1
        assert any(r.exc_info and r.levelno == logging.WARNING for r in caplog.records)
        h.feed(msg(buffer="b1"))  # the connector's replay
        await settle()
        assert len(rec.seen) == 2
        assert h.acks == ["b1"] and h.stats.delivered == 1


async def test_dead_letter_after_max_attempts() -> None:
    rec = Recorder()
    rec.fail_next = 10**6
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        assert h.acks == []  # acked only after the hand-off
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter,
                       max_delivery_attempts=3) as h:
        for attempt in range(1, 4):
            h.feed(msg(buffer=f"b{attempt}"))  # a redelivery may carry a new bufferId
            await settle()
            assert len(rec.seen) == attempt
        assert h.acks == ["b3"]
        assert h.stats.handler_failures == 3 and h.stats.dead_letters == 1
        (letter,) = letters
        assert (letter.kind, letter.reason, letter.key, letter.buffer_id, letter.attempts) == (
            "message", "attempts_exhausted", "slack:C1:m1", "b3", 3
        )
        assert "handler broke" in letter.error
        assert isinstance(letter.payload, MessageEvent) and letter.payload.text == "hi"
        # Given up means done: a further replay is dropped and acked, not run again.
        h.feed(msg(buffer="b4"))
        await settle()
        assert len(rec.seen) == 3 and h.acks == ["b3", "b4"]


async def test_attempts_of_keyless_delivery_count_per_buffer_id() -> None:
    rec = Recorder()
    rec.fail_next = 10**6
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter,
                       max_delivery_attempts=2) as h:
        h.feed(msg(mid=None, buffer="b1"), msg(mid=None, buffer="b2"))
        await settle()
        assert letters == []  # one failure each: two different deliveries
        h.feed(msg(mid=None, buffer="b1"))
        await settle()
        assert [(d.buffer_id, d.attempts) for d in letters] == [("b1", 2)]
        assert h.acks == ["b1"]


async def test_success_resets_the_attempt_count() -> None:
    rec = Recorder()
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter,
                       max_delivery_attempts=2) as h:
        rec.fail_next = 1
        h.feed(msg(mid=None, buffer="b1"))
        await settle()
        h.feed(msg(mid=None, buffer="b1"))  # succeeds
        await settle()
        rec.fail_next = 1
        h.feed(msg(mid=None, buffer="b1"))  # a fresh delivery reusing the id
        await settle()
        assert letters == []


async def test_default_dead_letter_is_logged_without_payload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail(forward: PassthroughForward) -> None:
        raise ValueError("nope")

    async with running(on_passthrough=fail, max_delivery_attempts=1) as h:
        h.feed(passthrough(buffer="p1"))
        await settle()
        assert h.acks == ["p1"] and h.stats.dead_letters == 1
    text = caplog.text
    assert "dead letter" in text and "attempts_exhausted" in text
    assert "secret-sig" not in text  # a webhook's headers never reach the log


async def test_dead_letter_hook_raising_still_acks(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    rec.fail_next = 1

    async def bad_hook(letter: DeadLetter) -> None:
        raise RuntimeError("hook broke")

    async with running(on_message=rec, on_dead_letter=bad_hook, max_delivery_attempts=1) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        assert h.acks == ["b1"]
        assert "on_dead_letter raised" in caplog.text


async def test_undecodable_payload_is_dead_lettered_and_acked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The frame envelope already guarantees an object, so from_wire practically never
    # refuses; if a future decoder does, the delivery must not be replayed forever.
    def refuse(obj: object) -> MessageEvent:
        raise FrameError("cannot decode")

    monkeypatch.setattr(MessageEvent, "from_wire", staticmethod(refuse))
    rec = Recorder()
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter) as h:
        h.feed(msg(buffer="b1"), msg())
        await settle()
        assert rec.seen == []
        letters.sort(key=lambda d: str(d.buffer_id))  # two lanes: either may go first
        assert [(d.reason, d.attempts, d.buffer_id) for d in letters] == [
            ("unparseable", 0, None), ("unparseable", 0, "b1")
        ]
        assert isinstance(letters[1].payload, dict)
        assert letters[1].payload["source"]["chat_id"] == "C1"
        assert h.acks == ["b1"] and h.stats.frames_rejected == 2


async def test_cancelled_handler_is_neither_acked_nor_counted_as_failure() -> None:
    rec = Recorder()
    rec.gate = trio.Event()  # never set
    async with running(on_message=rec) as h:
        h.feed(msg(buffer="b1"))
        await settle()
    assert h.acks == []
    assert (h.stats.delivered, h.stats.handler_failures) == (0, 0)
    assert h.pipeline._dedupe.claimed == frozenset()  # released, not committed
    assert "slack:C1:m1" not in h.pipeline._dedupe


async def test_no_handler_acks_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    async with running() as h:
        h.feed(msg(mid="1", buffer="b1"), msg(mid="2", buffer="b2"), passthrough("p1"))
        await settle()
        assert sorted(h.acks) == ["b1", "b2", "p1"]
    assert caplog.text.count("no handler is set") == 2  # once per kind


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


# --- overload ----------------------------------------------------------------------------


async def test_overload_drops_buffered_without_ack_and_redelivery_is_handled() -> None:
    rec = Recorder()
    rec.gate = trio.Event()
    async with running(on_message=rec, max_concurrent_handlers=1, max_inbound_queue=2) as h:
        h.feed(msg(mid="0", buffer="b0"))
        await settle()
        h.feed(*[msg(mid=str(i), buffer=f"b{i}") for i in range(1, 5)])
        await settle()
        # one running, two waiting, two refused
        assert (len(rec.seen), h.stats.queue_depth, h.stats.inbound_dropped) == (1, 2, 2)
        rec.gate.set()
        await settle()
        assert h.acks == ["b0", "b1", "b2"]  # the refused ones were never acked
        h.feed(msg(mid="3", buffer="b3"), msg(mid="4", buffer="b4"))  # redelivered
        await settle()
        assert [e.message_id for e in rec.seen] == ["0", "1", "2", "3", "4"]
        assert h.acks == ["b0", "b1", "b2", "b3", "b4"]


async def test_overload_queues_live_up_to_hard_cap_then_counts_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "trio_relay")
    rec = Recorder()
    rec.gate = trio.Event()
    bound = 3
    cap = bound * LIVE_OVERFLOW_FACTOR
    async with running(on_message=rec, max_concurrent_handlers=1,
                       max_inbound_queue=bound) as h:
        h.feed(msg(mid="0"))
        await settle()
        h.feed(*[msg(mid=str(i)) for i in range(1, 1 + cap + 2)])
        await settle()
        assert h.stats.queue_depth == cap
        assert h.stats.inbound_dropped == 2
        assert caplog.text.count("LOST live") == 2
        assert "deliveries waiting for a handler" in caplog.text
        rec.gate.set()
        await settle()
        assert len(rec.seen) == 1 + cap and h.stats.queue_depth == 0
        assert "overload over" in caplog.text


async def test_submit_before_run_is_kept_and_bounded() -> None:
    rec = Recorder()
    async with running(on_message=rec, start=False, max_inbound_queue=2) as h:
        h.feed(msg(mid="1", buffer="b1"), msg(mid="2", buffer="b2"),
               msg(mid="3", buffer="b3"), msg(mid="1", buffer="b1"))
        assert h.stats.queue_depth == 2 and h.stats.inbound_dropped == 2
        await h.start()
        await settle()
        assert [e.message_id for e in rec.seen] == ["1", "2"]
        assert h.acks == ["b1", "b2"] and h.stats.queue_depth == 0


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


async def test_passthrough_failure_then_redelivery_is_handled() -> None:
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
        h.feed(passthrough(buffer="p1"))
        await settle()
        assert calls == 2 and h.acks == ["p1"]


# --- durable dedupe ----------------------------------------------------------------------


async def test_durable_dedupe_survives_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    rec = Recorder()
    async with running(on_message=rec, dedupe_path=path) as h:
        h.feed(msg(mid="1", buffer="b1"), msg(mid="2", buffer="b2"))
        await eventually(lambda: len(h.acks) == 2)
    rec2 = Recorder()
    async with running(on_message=rec2, dedupe_path=path) as h2:
        # The connector lost our acks and redelivers, under new buffer ids.
        h2.feed(msg(mid="1", buffer="c1"), msg(mid="2", buffer="c2"), msg(mid="3", buffer="c3"))
        await eventually(lambda: len(h2.acks) == 3)
        assert rec2.keys == ["slack:C1:3"]
        assert h2.stats.replays_dropped == 2


async def test_durable_dedupe_is_bounded(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    async with running(on_message=Recorder(), dedupe_path=path, dedupe_size=2) as h:
        h.feed(*[msg(mid=str(i), buffer=f"b{i}") for i in range(3)])
        await eventually(lambda: len(h.acks) == 3)
    rec = Recorder()
    async with running(on_message=rec, dedupe_path=path, dedupe_size=2) as h2:
        h2.feed(*[msg(mid=str(i), buffer=f"c{i}") for i in range(3)])
        await eventually(lambda: len(h2.acks) == 3)
        assert rec.keys == ["slack:C1:0"]  # the oldest was forgotten


async def test_failed_or_cancelled_handling_is_not_persisted(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    rec = Recorder()
    rec.fail_next = 1
    async with running(on_message=rec, dedupe_path=path) as h:
        h.feed(msg(mid="fails", buffer="b1"))
        await eventually(lambda: h.stats.handler_failures == 1)
        rec.gate = trio.Event()  # the next one is still running at shutdown
        h.feed(msg(mid="cut", buffer="b2"))
        await eventually(lambda: len(rec.seen) == 2)
    rec2 = Recorder()
    async with running(on_message=rec2, dedupe_path=path) as h2:
        h2.feed(msg(mid="fails", buffer="b1"), msg(mid="cut", buffer="b2"))
        await eventually(lambda: len(h2.acks) == 2)
        assert rec2.keys == ["slack:C1:fails", "slack:C1:cut"]


async def test_early_replay_is_checked_against_the_loaded_store(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    async with running(on_message=Recorder(), dedupe_path=path) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: h.acks == ["b1"])
    rec = Recorder()
    async with running(on_message=rec, dedupe_path=path, start=False) as h2:
        h2.feed(msg(buffer="b1"))  # before the store is loaded
        await h2.start()
        await eventually(lambda: h2.acks == ["b1"])
        assert rec.seen == []


async def test_unusable_store_falls_back_to_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    path = str(tmp_path / "missing-dir" / "dedupe.sqlite")
    async with running(on_message=rec, dedupe_path=path) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: len(h.acks) == 1)
        h.feed(msg(buffer="b1"))
        await eventually(lambda: len(h.acks) == 2)
        assert len(rec.seen) == 1
    assert "dedupe is memory-only" in caplog.text


async def test_store_writes_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []
    real_add = SqliteDedupeStore.add

    def spy(self: SqliteDedupeStore, keys: Any) -> None:
        threads.append(threading.current_thread())
        real_add(self, keys)

    monkeypatch.setattr(SqliteDedupeStore, "add", spy)
    async with running(on_message=Recorder(), dedupe_path=str(tmp_path / "d.sqlite")) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: bool(threads))
    assert threading.main_thread() not in threads


async def test_a_hung_disk_cannot_hold_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = threading.Event()
    monkeypatch.setattr(_dedupe_writer, "FINAL_FLUSH_TIMEOUT", 0.2)

    def hung(self: SqliteDedupeStore, keys: Any) -> None:
        with self._lock:  # as the real add holds it through the write
            stuck.wait(10)

    monkeypatch.setattr(SqliteDedupeStore, "add", hung)
    try:
        with trio.fail_after(3):
            async with running(on_message=Recorder(), dedupe_path=str(tmp_path / "d")) as h:
                h.feed(msg(buffer="b1"))
                await eventually(lambda: h.acks == ["b1"])
        assert "not flushed within" in caplog.text
    finally:
        stuck.set()  # let the abandoned worker thread finish


async def test_store_write_failure_keeps_memory_dedupe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: SqliteDedupeStore, keys: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(SqliteDedupeStore, "add", broken)
    rec = Recorder()
    async with running(on_message=rec, dedupe_path=str(tmp_path / "d.sqlite")) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: "could not persist" in caplog.text)
        h.feed(msg(buffer="b1"))
        await eventually(lambda: len(h.acks) == 2)
        assert len(rec.seen) == 1


# --- pre-handler steps --------------------------------------------------------------------


async def test_pre_handler_steps_run_in_order_and_may_replace_the_event() -> None:
    import dataclasses

    rec = Recorder()
    calls: list[str] = []

    async def first(event: MessageEvent) -> MessageEvent | None:
        calls.append(f"first:{event.text}")
        return dataclasses.replace(event, text=event.text + "+media")

    async def second(event: MessageEvent) -> MessageEvent | None:
        calls.append(f"second:{event.text}")
        return event

    async with running(on_message=rec) as h:
        h.pipeline.add_pre_handler(first)
        h.pipeline.add_pre_handler(second)
        h.feed(msg(buffer="b1"))
        await settle()
        assert calls == ["first:hi", "second:hi+media"]
        assert [e.text for e in rec.seen] == ["hi+media"]
        assert h.acks == ["b1"]


async def test_pre_handler_may_consume_a_message_which_is_then_acked_and_deduped() -> None:
    rec = Recorder()

    async def consume(event: MessageEvent) -> MessageEvent | None:
        return None if event.text == "/press" else event

    async with running(on_message=rec) as h:
        h.pipeline.add_pre_handler(consume)
        h.feed(msg(mid="p", buffer="b1", text="/press"), msg(mid="t", buffer="b2"))
        await settle()
        assert [e.message_id for e in rec.seen] == ["t"]
        assert h.acks == ["b1", "b2"]
        h.feed(msg(mid="p", buffer="b1", text="/press"))  # a replay of the consumed one
        await settle()
        assert h.acks == ["b1", "b2", "b1"] and h.stats.replays_dropped == 1


async def test_pre_handler_runs_without_on_message() -> None:
    seen: list[str | None] = []

    async def record(event: MessageEvent) -> MessageEvent | None:
        seen.append(event.message_id)
        return event

    async with running() as h:
        h.pipeline.add_pre_handler(record)
        h.feed(msg(buffer="b1"))
        await settle()
        assert seen == ["m1"] and h.acks == ["b1"]


async def test_pre_handler_failure_fails_the_delivery() -> None:
    rec = Recorder()
    fail = [True]

    async def flaky(event: MessageEvent) -> MessageEvent | None:
        if fail.pop() if fail else False:
            raise OSError("media download failed")
        return event

    async with running(on_message=rec) as h:
        h.pipeline.add_pre_handler(flaky)
        h.feed(msg(buffer="b1"))
        await settle()
        assert rec.seen == [] and h.acks == [] and h.stats.handler_failures == 1
        h.feed(msg(buffer="b1"))  # redelivered: the step succeeds this time
        await settle()
        assert len(rec.seen) == 1 and h.acks == ["b1"]
