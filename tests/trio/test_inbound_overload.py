"""InboundPipeline under overload, driven directly (see ``inbound_support``): buffered
deliveries past ``max_inbound_queue`` are left to the connector (dropped without ack,
redelivered), live ones queue up to ``LIVE_OVERFLOW_FACTOR`` times that, then are counted
and logged; frames submitted before ``run()`` are kept within the same bound.
"""

from __future__ import annotations

import logging

import pytest
import trio
from inbound_support import Recorder, msg, running, settle

from trio_relay._core.backlog import LIVE_OVERFLOW_FACTOR


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
