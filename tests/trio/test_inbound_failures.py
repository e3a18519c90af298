"""InboundPipeline: failed handlers (in-session retries, attempts, dead letters), handlers
that raise anything at all, pre-handler steps, and leaving while handlers run.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from inbound_support import (
    Recorder,
    RecordingStore,
    msg,
    passthrough,
    running,
    settle,
)

from trio_relay import DeadLetter, MessageEvent, PassthroughForward
from trio_relay._core.frames import InboundFrame

# --- failures, retries, dead letters ----------------------------------------------------


async def test_failed_handler_is_retried_in_session_after_a_backoff(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    rec.fail_next = 2
    times: list[float] = []

    async def timed(event: MessageEvent) -> None:
        times.append(trio.current_time())
        await rec(event)

    async with running(on_message=timed) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        assert h.acks == [] and h.stats.handler_failures == 1
        assert any(r.exc_info and r.levelno == logging.WARNING for r in caplog.records)
        h.feed(msg(buffer="b1"))  # a replay during the backoff is a copy in flight
        await trio.sleep(10)
        assert [e.attempt for e in rec.seen] == [1, 2, 3]
        assert times == [0.0, 0.5, 1.5]  # 0.5 s, then 1 s
        assert h.acks == ["b1"] and h.stats.delivered == 1
        assert h.stats.handler_failures == 2 and h.stats.replays_dropped == 1


async def test_retry_keeps_the_chat_order_and_frees_the_slot(autojump_clock: Any) -> None:
    order: list[str] = []
    failed: set[str] = set()

    async def handler(event: MessageEvent) -> None:
        key = f"{event.source.chat_id}/{event.message_id}"
        order.append(key)
        if key == "C1/1" and key not in failed:
            failed.add(key)
            raise RuntimeError("once")

    async with running(on_message=handler, max_concurrent_handlers=1) as h:
        h.feed(msg(chat="C1", mid=1), msg(chat="C1", mid=2), msg(chat="C2", mid=1))
        await trio.sleep(10)
        # C2 ran during C1/1's backoff (the slot was free); C1/2 waited for C1/1.
        assert [k for k in order if k.startswith("C1")] == ["C1/1", "C1/1", "C1/2"]
        assert order.index("C2/1") < 2 and order[-1] == "C1/2"


async def test_dead_letter_after_max_attempts(autojump_clock: Any) -> None:
    rec = Recorder()
    rec.fail_next = 10**6
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        assert h.acks == []  # acked only after the hand-off
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter,
                       max_delivery_attempts=3) as h:
        h.feed(msg(buffer="b1"))
        await trio.sleep(60)
        assert [e.attempt for e in rec.seen] == [1, 2, 3]
        assert h.acks == ["b1"]
        assert h.stats.handler_failures == 3 and h.stats.dead_letters == 1
        (letter,) = letters
        assert (letter.kind, letter.reason, letter.key, letter.buffer_id, letter.attempts) == (
            "message", "attempts_exhausted", "slack:C1:m1", "b1", 3
        )
        assert "handler broke" in letter.error
        assert isinstance(letter.payload, MessageEvent) and letter.payload.text == "hi"
        # Given up means done: a further replay is dropped and acked, not run again.
        h.feed(msg(buffer="b4"))
        await settle()
        assert len(rec.seen) == 3 and h.acks == ["b1", "b4"]


async def test_live_keyless_delivery_is_retried_too(autojump_clock: Any) -> None:
    rec = Recorder()
    rec.fail_next = 1
    async with running(on_message=rec) as h:
        h.feed(msg(mid=None))
        await trio.sleep(5)
        assert [e.attempt for e in rec.seen] == [1, 2] and h.stats.delivered == 1


async def test_a_fresh_delivery_after_success_starts_at_attempt_one(autojump_clock: Any) -> None:
    rec = Recorder()
    async with running(on_message=rec) as h:
        rec.fail_next = 1
        h.feed(msg(mid=None, buffer="b1"))
        await trio.sleep(5)
        h.feed(msg(mid=None, buffer="b1"))  # keyless: not deduped, a new delivery
        await trio.sleep(5)
        assert [e.attempt for e in rec.seen] == [1, 2, 1]


async def test_retry_in_backoff_is_abandoned_when_draining(autojump_clock: Any) -> None:
    rec = Recorder()
    rec.fail_next = 1
    async with running(on_message=rec) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        with trio.fail_after(0.1):  # no handler runs: drain returns at once
            await h.pipeline.drain()
        await trio.sleep(5)
        assert len(rec.seen) == 1 and h.acks == []  # left to the connector


async def test_a_handler_failing_during_the_drain_is_not_retried(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[float] = []

    async def fails_late(event: MessageEvent) -> None:
        attempts.append(trio.current_time())
        await trio.sleep(1)
        raise RuntimeError("failed after the drain began")

    async with running(on_message=fails_late) as h:
        h.feed(msg(buffer="b1"))
        await settle()
        await h.pipeline.drain()  # returns once the handler has failed, not later
        assert trio.current_time() == 1
        await trio.sleep(0.1)  # abandoned at once, not after the 0.5 s backoff
        assert any("retry of" in r.getMessage() and "abandoned" in r.getMessage()
                   for r in caplog.records)
        await trio.sleep(10)
        assert attempts == [0.0] and h.acks == []  # left to the connector, never retried


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


async def test_undecodable_payload_is_dead_lettered_and_acked() -> None:
    # The codec already guarantees an event object, so MessageEvent.from_wire practically
    # never refuses; if it does, the delivery must not be replayed forever. Frames built
    # here directly (not decoded) are the only way to reach that path.
    rec = Recorder()
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        letters.append(letter)

    async with running(on_message=rec, on_dead_letter=on_dead_letter) as h:
        h.pipeline.submit(InboundFrame(["not", "an", "object"], "b1"))  # type: ignore[arg-type]
        h.pipeline.submit(InboundFrame("neither", None))  # type: ignore[arg-type]
        await settle()
        assert rec.seen == []
        letters.sort(key=lambda d: str(d.buffer_id))  # two lanes: either may go first
        assert [(d.reason, d.attempts, d.buffer_id) for d in letters] == [
            ("unparseable", 0, None), ("unparseable", 0, "b1")
        ]
        assert letters[1].payload == ["not", "an", "object"]
        assert h.acks == ["b1"] and h.stats.frames_rejected == 2


async def test_cancelled_handler_is_neither_acked_nor_counted_as_failure() -> None:
    rec = Recorder()
    rec.gate = trio.Event()  # never set
    store = RecordingStore()
    async with running(on_message=rec, dedupe_store=store) as h:
        h.feed(msg(buffer="b1"))
        await settle()
    assert h.acks == []
    assert (h.stats.delivered, h.stats.handler_failures) == (0, 0)
    # Released, not committed: the store was told so...
    assert store.calls == [("claim", "slack:C1:m1"), ("release", "slack:C1:m1")]
    # ...and a pipeline on the same store (the relay reopened) runs the redelivery.
    again = Recorder()
    async with running(on_message=again, dedupe_store=store) as h2:
        h2.feed(msg(buffer="b1"))
        await settle()
    assert again.keys == ["slack:C1:m1"] and h2.acks == ["b1"]


async def test_no_handler_acks_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    async with running() as h:
        h.feed(msg(mid="1", buffer="b1"), msg(mid="2", buffer="b2"), passthrough("p1"))
        await settle()
        assert sorted(h.acks) == ["b1", "b2", "p1"]
    assert caplog.text.count("no handler is set") == 2  # once per kind


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


async def test_pre_handler_failure_fails_the_delivery(autojump_clock: Any) -> None:
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
        await trio.sleep(1)  # retried after the backoff: the step succeeds this time
        assert [e.attempt for e in rec.seen] == [2] and h.acks == ["b1"]


# --- a handler may raise anything ---------------------------------------------------------


async def test_a_foreign_cancelled_from_a_handler_does_not_kill_the_pipeline(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The handler re-raises a Cancelled it caught in a scope of its own, after that
    # scope ended: nothing in the pipeline was cancelled. It used to end the pipeline's
    # task group quietly while the relay stayed connected and dropped every later
    # delivery unacked.
    runs: list[str | None] = []

    async def handler(event: MessageEvent) -> None:
        runs.append(event.message_id)
        if event.message_id == "poison" and event.attempt == 1:
            caught: trio.Cancelled | None = None
            with trio.CancelScope() as scope:
                scope.cancel()
                try:
                    await trio.sleep(1)
                except trio.Cancelled as exc:
                    caught = exc
                    raise
            assert caught is not None
            raise caught

    async with running(on_message=handler) as h:
        h.feed(msg(mid="poison", buffer="b1"))
        await settle()
        assert h.stats.handler_failures == 1
        assert "Cancelled of a scope it does not own" in caplog.text
        h.feed(msg(chat="C2", mid="after", buffer="b2"))
        await trio.sleep(5)
        assert sorted(map(str, runs)) == ["after", "poison", "poison"]  # retried, then ok
        assert sorted(h.acks) == ["b1", "b2"]


async def test_a_cancelled_relay_still_ends_the_handlers() -> None:
    # The other side of the rule above: a real cancellation of the pipeline is never
    # taken for a handler failure.
    rec = Recorder()
    rec.gate = trio.Event()
    async with running(on_message=rec) as h:
        h.feed(msg(buffer="b1"))
        await settle()
    assert h.stats.handler_failures == 0 and h.acks == []


# --- leaving while handlers run ---------------------------------------------------------------


async def test_drain_waits_for_running_handlers_then_they_ack(autojump_clock: Any) -> None:
    async def slow(event: MessageEvent) -> None:
        await trio.sleep(3)

    async with running(on_message=slow) as h:
        h.feed(msg(buffer="b1"), msg(chat="C2", buffer="b2"), msg(buffer="b3"))
        await settle()
        start = trio.current_time()
        await h.pipeline.drain()
        assert trio.current_time() - start == 3  # both running handlers finished
        assert sorted(h.acks) == ["b1", "b2"]  # b3 (queued behind b1) was not started
        h.feed(msg(chat="C9", buffer="b9"))  # nothing new starts once draining
        await trio.sleep(10)
        assert sorted(h.acks) == ["b1", "b2"]


async def test_handler_cancelled_after_drain_is_logged_with_its_ids_and_not_acked(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    rec.gate = trio.Event()  # never set
    async with running(on_message=rec) as h:
        h.feed(msg(mid="stuck-1", buffer="b1"))
        await settle()
        with trio.move_on_after(5):
            await h.pipeline.drain()
    assert h.acks == []
    assert "message_id=stuck-1" in caplog.text and "not acked" in caplog.text
