"""Replay storms: the connector replays everything unacked on every handshake, and our
acks keep getting lost. Each handler must still run once (issue: 1,000 buffered
deliveries replayed on 20 reconnects ran handlers 10,272 times with a 512-key window).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from inbound_support import Recorder, msg, running, settle

from trio_relay._core.config import RelayConfig
from trio_relay._core.dedupe import dedupe_window


def test_the_window_covers_what_the_pipeline_can_hold() -> None:
    config = RelayConfig()
    window = dedupe_window(
        config.dedupe_size, config.max_inbound_queue, config.max_concurrent_handlers
    )
    assert window == config.max_inbound_queue + config.max_concurrent_handlers == 1016


async def test_storm_with_acks_lost_in_flight_runs_each_handler_once(autojump_clock: Any) -> None:
    # Defaults: queue 1,000, dedupe_size 512. Every ack "goes out" (send_ack says yes)
    # and is lost with the connection, so the connector replays all 1,000 each time.
    rec = Recorder()
    buffered = [msg(chat=f"C{i % 40}", mid=f"m{i}", buffer=f"b{i}") for i in range(1000)]
    async with running(on_message=rec) as h:
        for _ in range(20):
            h.acks.clear()  # lost
            h.feed(*buffered)
            await settle()
        runs = Counter(rec.keys)
        assert len(runs) == 1000 and max(runs.values()) == 1
        assert h.stats.delivered == 1000 and len(h.acks) == 1000  # the last replay acked


async def test_storm_larger_than_the_window_with_no_connection_to_ack_on(
    autojump_clock: Any,
) -> None:
    # The connector holds three windows' worth; handled keys whose ack could not be
    # sent stay pinned, so none is forgotten before its replay has been acked.
    rec = Recorder()
    small = {"dedupe_size": 8, "max_inbound_queue": 100, "max_concurrent_handlers": 4}
    pending = {f"b{i}": msg(chat=f"C{i % 10}", mid=f"m{i}", buffer=f"b{i}") for i in range(312)}
    async with running(on_message=rec, **small) as h:
        assert h.pipeline.window == 104
        h.connected = False
        for _ in range(6):  # queue-full refusals: takes a few replays to get through all
            h.feed(*pending.values())
            await settle()
        assert h.acks == [] and len(set(rec.keys)) == 312
        h.connected = True
        for _ in range(3):
            h.feed(*pending.values())
            await settle()
            for bid in h.acks:
                pending.pop(bid, None)  # the connector got these
        assert pending == {}
        runs = Counter(rec.keys)
        assert len(runs) == 312 and max(runs.values()) == 1


async def test_acks_that_die_queued_with_their_connection_keep_their_keys(
    autojump_clock: Any,
) -> None:
    # Each ack is queued on a connection that dies before writing it (send_ack said
    # yes; the socket never got it), every time, and the connector holds three windows'
    # worth: only pinning each key until its ack is written keeps every handler at one run.
    rec = Recorder()
    small = {"dedupe_size": 8, "max_inbound_queue": 100, "max_concurrent_handlers": 4}
    pending = [msg(chat=f"C{i % 10}", mid=f"m{i}", buffer=f"b{i}") for i in range(312)]
    async with running(on_message=rec, **small) as h:
        h.written = False
        for _ in range(8):
            h.feed(*pending)
            await settle()
        runs = Counter(rec.keys)
        assert len(runs) == 312 and max(runs.values()) == 1
        h.written = True  # a healthy connection at last: each replay's ack unpins
        h.acks.clear()
        h.feed(*pending)
        await settle()
        assert len(h.acks) == 312 and len(rec.keys) == 312  # recognised, acked, not run
        # Unpinned now: the keys are only as safe as the window (104). Two windows of
        # fresh deliveries push them out, and a replay after that runs again -- which
        # shows none of the 312 is still held past the window.
        fresh = [msg(chat=f"C{i % 10}", mid=f"n{i}", buffer=f"f{i}") for i in range(208)]
        h.feed(*fresh)
        await settle()
        h.feed(pending[0])
        await settle()
        assert Counter(rec.keys)["slack:C0:m0"] == 2
