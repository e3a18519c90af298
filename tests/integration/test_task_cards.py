"""Task cards (issue 21, item 2; docs/protocol.md, "Task cards") against the reference
connector: the whole list of chunks on each update under ``turn:<reply_to>`` with
``metadata.thread_ts``, a ``task_card_stop`` when the block ends (also when it is
cancelled), nothing sent where the descriptor does not list ``task_card``, and never an
exception for a network failure."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from live_support import live_relay

from trio_relay import TaskChunk
from trio_relay.testing import live_descriptor

CARDS = live_descriptor(drafts=False, task_cards=True)


async def test_each_update_sends_the_whole_card_and_the_block_ends_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", CARDS) as (connector, relay, wire):
        connector.say("C1", "plan a trip", scope_id="W1")  # the chat's tenant
        await trio.sleep(1)
        async with relay.task_card("C1", reply_to="u1") as card:
            first = await card.update([TaskChunk("t1", "Search flights", "in_progress")])
            second = await card.update(
                [
                    TaskChunk("t1", "Search flights", "complete", details="3 found"),
                    TaskChunk("t2", "Book", "pending"),
                ]
            )
    frames = wire.ops("task_card", "task_card_stop")
    assert [f["op"] for f in frames] == ["task_card", "task_card", "task_card_stop"]
    assert {f["card_id"] for f in frames} == {"turn:u1"} == {card.card_id}
    assert all(f["metadata"]["thread_ts"] == "u1" for f in frames)
    assert all(f["metadata"]["scope_id"] == "W1" for f in frames)  # routed as any reply
    assert frames[1]["chunks"] == [
        {"id": "t1", "title": "Search flights", "status": "complete", "details": "3 found"},
        {"id": "t2", "title": "Book", "status": "pending"},
    ]
    assert first.success and second.success and card.outcomes == [first, second]
    assert card.stopped is not None and card.stopped.success


async def test_a_card_without_reply_to_gets_a_fresh_id_and_no_thread(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", CARDS) as (_connector, relay, wire):
        ids = []
        for _ in range(2):
            async with relay.task_card("C1") as card:
                await card.update([TaskChunk("t1", "Think", "in_progress")])
            ids.append(card.card_id)
    assert ids[0] != ids[1] and all(i.startswith("card:") for i in ids)
    assert not any("metadata" in f for f in wire.ops("task_card", "task_card_stop"))


async def test_a_cancelled_turn_still_stops_its_card(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", CARDS) as (_connector, relay, wire):
        with trio.move_on_after(1) as scope:
            async with relay.task_card("C1", reply_to="u9") as card:
                await card.update([TaskChunk("t1", "Long step", "in_progress")])
                await trio.sleep(10)
        assert scope.cancelled_caught
    assert [f["op"] for f in wire.ops("task_card", "task_card_stop")] == [
        "task_card",
        "task_card_stop",
    ]
    assert card.stopped is not None and card.stopped.success


async def test_where_the_descriptor_lacks_task_card_nothing_is_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        live_relay("slack", live_descriptor()) as (_connector, relay, wire),
        relay.task_card("C1", reply_to="u1") as card,
    ):
        outcome = await card.update([TaskChunk("t1", "Search", "in_progress")])
    assert not outcome.success and not outcome.ambiguous
    assert outcome.code == "unsupported_op" and "task_card" in (outcome.error or "")
    assert card.stopped is None
    assert not wire.ops("task_card", "task_card_stop")


async def test_a_network_failure_is_an_outcome_never_an_exception(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        live_relay("slack", CARDS) as (connector, relay, _wire),
        relay.task_card("C1", reply_to="u1") as card,
    ):
        await card.update([TaskChunk("t1", "Search", "in_progress")])
        await connector.stop()  # the connector is gone: no connection now
        lost = await card.update([TaskChunk("t1", "Search", "complete")])
    assert not lost.success and lost.code == "not_connected"
    assert card.stopped is not None and card.stopped.code == "not_connected"


async def test_task_chunks_and_updates_check_their_arguments(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(ValueError, match="status must be one of pending, in_progress"):
        TaskChunk("t1", "Search", "done")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"TaskChunk\.title must be a str"):
        TaskChunk("t1", 5, "pending")  # type: ignore[arg-type]
    async with live_relay("slack", CARDS) as (_connector, relay, _wire):
        async with relay.task_card("C1") as card:
            with pytest.raises(TypeError, match="takes TaskChunk items"):
                await card.update([{"id": "t1"}])  # type: ignore[list-item]
        with pytest.raises(RuntimeError, match="has ended"):
            await card.update([])
