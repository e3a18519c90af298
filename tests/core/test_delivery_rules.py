"""The inbound pipeline's pure rules: decoding a frame into a delivery, what follows a
failure, admission past the bound, the dedupe window and its pins, the memory store."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from trio_relay._core.backlog import Backlog, Room
from trio_relay._core.dedupe import Claim, DedupeSet, dedupe_window
from trio_relay._core.dedupe_store import MemoryDedupeStore
from trio_relay._core.delivery import (
    RETRY_MAX_DELAY,
    GiveUp,
    RetryIn,
    after_failure,
    decode_delivery,
)
from trio_relay._core.event import MessageEvent
from trio_relay._core.frames import InboundFrame, PassthroughFrame
from trio_relay._core.stats import RelayStats

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the memory store's), without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise AssertionError("the coroutine suspended")


# --- decode_delivery ------------------------------------------------------------------


def test_a_message_gets_its_key_and_its_chat_lane() -> None:
    event = {"message_id": 7, "source": {"platform": " Slack", "chat_id": "C:1"}}
    d = decode_delivery(InboundFrame(event, "b1"))
    assert (d.kind, d.key, d.lane, d.buffer_id, d.failures) == (
        "message", "slack:C%3A1:7", ("slack", "C:1"), "b1", 0
    )
    assert isinstance(d.payload, MessageEvent) and d.payload.attempt == 1
    assert "C%3A1" in d.label and "hi" not in d.label


def test_a_passthrough_is_keyed_by_buffer_id_in_a_lane_of_its_own() -> None:
    forward = {"platform": "slack", "botId": "B", "method": "POST", "path": "/x",
               "headers": [], "bodyB64": ""}
    d = decode_delivery(PassthroughFrame(forward, "a:b"))
    assert (d.kind, d.key, d.lane) == ("passthrough", "passthrough:a%3Ab", None)
    assert decode_delivery(PassthroughFrame(forward, None)).key is None


def test_an_undecodable_payload_keeps_the_raw_object_and_the_error() -> None:
    d = decode_delivery(InboundFrame(["not", "an", "object"], "b1"))  # type: ignore[arg-type]
    assert d.payload is None and d.key is None and d.raw == ["not", "an", "object"]
    assert d.decode_error is not None and "FrameError" in d.decode_error


# --- after_failure --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "limit", "decision"),
    [
        (1, 5, RetryIn(0.5)),
        (2, 5, RetryIn(1.0)),
        (3, 5, RetryIn(2.0)),
        (4, 5, RetryIn(4.0)),
        (5, 5, GiveUp()),
        (1, 1, GiveUp()),
        (9, 20, RetryIn(RETRY_MAX_DELAY)),
    ],
)
def test_after_failure(failures: int, limit: int, decision: RetryIn | GiveUp) -> None:
    assert after_failure(failures, limit) == decision


# --- Backlog --------------------------------------------------------------------------


def test_backlog_refuses_buffered_past_the_bound_and_loses_live_past_the_cap() -> None:
    b = Backlog(2, live_factor=2)
    assert b.room(buffered=True) == (Room.YES, False)
    b.add(2)
    assert b.room(buffered=True) == (Room.REFUSED, True)  # the overload starts
    assert b.room(buffered=False) == (Room.YES, False)  # announced once only
    b.add(2)
    assert b.room(buffered=False) == (Room.LOST, False)
    assert b.remove(2) is False  # 2 waiting: not yet halved
    assert b.remove(1) is True and not b.overloaded  # 1 <= 2 // 2: over


def test_backlog_rejects_a_bad_bound() -> None:
    with pytest.raises(ValueError):
        Backlog(0)


# --- the window and its pins --------------------------------------------------------


def test_window_never_below_what_the_pipeline_holds() -> None:
    assert dedupe_window(512, 1000, 16) == 1016
    assert dedupe_window(5000, 1000, 16) == 5000


def test_pinned_keys_are_never_evicted_until_unpinned() -> None:
    d = DedupeSet(2)
    d.commit("p", pinned=True)
    for key in "abc":
        d.commit(key)
    assert "p" in d and d.claim("p") is Claim.DONE and "a" not in d
    assert d.pinned == {"p"} and len(d) == 3
    assert d.unpin("p") == ["b"]  # joins as the newest, evicting the oldest
    assert d.pinned == frozenset() and "p" in d
    assert d.unpin("p") == []  # not pinned: nothing happens


def test_a_pinned_key_committed_again_stays_pinned() -> None:
    d = DedupeSet(1)
    d.commit("a")
    d.commit("a", pinned=True)
    d.commit("a")
    d.commit("b")
    d.commit("c")
    assert d.pinned == {"a"} and "a" in d


def test_adopt_takes_claims_commits_and_pins() -> None:
    small = DedupeSet(2)
    assert small.claim("x") is Claim.NEW
    small.commit("a")
    small.commit("p", pinned=True)
    big = DedupeSet(10)
    big.adopt(small)
    assert big.claim("x") is Claim.IN_PROGRESS
    assert "a" in big and big.pinned == {"p"}


# --- MemoryDedupeStore ------------------------------------------------------------------


async def _replicas(store: MemoryDedupeStore, first: str, second: str) -> list[Claim]:
    # Two relays' sessions; the second opens with a larger window (the set grows).
    stats = RelayStats()
    async with store.open(namespace=first, capacity=4, stats=stats) as one, \
            store.open(namespace=second, capacity=8, stats=stats) as two:
        assert await one.load_recent() == []
        answers = [await one.claim("k"), await two.claim("k")]
        one.commit("k")
        answers.append(await two.claim("k"))
        return answers


def test_memory_store_shared_by_two_relays_of_one_gateway() -> None:
    store = MemoryDedupeStore()
    assert run(_replicas(store, "gw", "gw")) == [Claim.NEW, Claim.IN_PROGRESS, Claim.DONE]
    assert "namespaces=1" in repr(store)


def test_memory_store_keeps_gateways_apart() -> None:
    # gw-b's first claim is its own (NEW); asking again is a copy in flight, never gw-a's.
    store = MemoryDedupeStore()
    assert run(_replicas(store, "gw-a", "gw-b")) == [
        Claim.NEW, Claim.NEW, Claim.IN_PROGRESS
    ]


async def _released(store: MemoryDedupeStore) -> Claim:
    async with store.open(namespace="gw", capacity=4, stats=RelayStats()) as one:
        await one.claim("k")
        one.release("k")  # the handler failed: the next copy runs
        return await one.claim("k")


def test_memory_store_release_lets_the_next_copy_run() -> None:
    assert run(_released(MemoryDedupeStore())) is Claim.NEW
