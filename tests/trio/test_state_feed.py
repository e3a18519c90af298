"""The state feed behind ``Relay.state_changes()`` and ``Relay.wait_state()``, alone:
order, per-subscriber delivery, the bound on a slow subscriber, the end after CLOSED,
and waits that can never be satisfied."""

from __future__ import annotations

import gc
import itertools
import weakref

import pytest
import trio
import trio.testing

from trio_relay import RelayClosed, RelayRevoked, State
from trio_relay._core.lifecycle import Change
from trio_relay._trio.state_feed import BUFFERED_CHANGES, StateFeed

C, U, R, D, X, Z = (
    State.CONNECTING,
    State.CONNECTED,
    State.RECONNECTING,
    State.DORMANT,
    State.REVOKED,
    State.CLOSED,
)


def flap(feed: StateFeed, times: int) -> list[Change]:
    changes = []
    for n in range(times):
        old = feed.state
        new = R if old is U else U
        change = Change(old, new, f"change {n}")
        feed.publish(change)
        changes.append(change)
    return changes


async def collect(feed: StateFeed, into: list[tuple[State, State, str]]) -> None:
    async for item in feed.subscribe():
        into.append(item)


async def test_every_subscriber_gets_every_change_in_order() -> None:
    feed = StateFeed(C)
    first: list[tuple[State, State, str]] = []
    second: list[tuple[State, State, str]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, feed, first)
        nursery.start_soon(collect, feed, second)
        await trio.testing.wait_all_tasks_blocked()
        sent = flap(feed, 3)
        feed.publish(Change(feed.state, Z, "relay closed"))
    expected = [(c.old, c.new, c.cause) for c in sent] + [(U, Z, "relay closed")]
    assert first == second == expected


async def test_a_subscriber_sees_changes_from_its_subscription_on() -> None:
    feed = StateFeed(C)
    flap(feed, 2)  # before anyone listened
    changes = feed.subscribe()
    feed.publish(Change(R, U, "later"))
    assert await changes.__anext__() == (R, U, "later")


async def test_a_slow_subscriber_loses_the_oldest_and_stays_a_chain() -> None:
    """Publishing never waits: past the bound the oldest changes go, and the next one
    read starts from the state this subscriber last saw."""
    feed = StateFeed(C)
    changes = feed.subscribe()
    sent = flap(feed, BUFFERED_CHANGES + 10)  # nobody reads meanwhile
    got = [await changes.__anext__() for _ in range(BUFFERED_CHANGES)]
    kept = sent[10:]
    assert got[0] == (C, kept[0].new, f"missed 10 state changes; {kept[0].cause}")
    assert got[1:] == [(c.old, c.new, c.cause) for c in kept[1:]]
    for before, after in itertools.pairwise(got):
        assert before[1] is after[0]  # a chain: each old is the previous new
    assert got[-1][1] is feed.state


async def test_the_iterator_ends_after_closed_and_a_new_one_is_empty() -> None:
    feed = StateFeed(U)
    changes = feed.subscribe()
    feed.publish(Change(U, Z, "relay closed"))
    assert [item async for item in changes] == [(U, Z, "relay closed")]
    assert [item async for item in feed.subscribe()] == []


async def test_close_ends_a_subscription_and_unsubscribes() -> None:
    feed = StateFeed(C)
    changes = feed.subscribe()
    changes.close()
    feed.publish(Change(C, U, "up"))
    assert [item async for item in changes] == []
    # Unsubscribed: nothing of the feed keeps the closed iterator alive.
    gone = weakref.ref(changes)
    del changes
    gc.collect()
    assert gone() is None


async def test_an_abandoned_subscriber_is_dropped() -> None:
    feed = StateFeed(C)
    gone = weakref.ref(feed.subscribe())  # never read, never closed
    gc.collect()
    assert gone() is None  # the feed does not keep it alive
    feed.publish(Change(C, U, "up"))  # and publishing past it is fine
    assert feed.state is U


async def test_wait_for_returns_at_once_or_on_the_change(
    autojump_clock: trio.testing.MockClock,
) -> None:
    feed = StateFeed(C)
    assert await feed.wait_for(frozenset({C, U}), timeout=1) is C
    async with trio.open_nursery() as nursery:

        async def later() -> None:
            await trio.sleep(2)
            feed.publish(Change(C, U, "up"))

        nursery.start_soon(later)
        start = trio.current_time()
        assert await feed.wait_for(frozenset({U}), timeout=None) is U
        assert trio.current_time() - start == 2


async def test_wait_for_times_out_to_the_tick(autojump_clock: trio.testing.MockClock) -> None:
    feed = StateFeed(C)
    start = trio.current_time()
    with pytest.raises(TimeoutError, match="not connected within 3 s"):
        await feed.wait_for(frozenset({U}), timeout=3)
    assert trio.current_time() - start == 3


@pytest.mark.parametrize(
    ("state", "wanted", "error"),
    [
        (X, {U}, RelayRevoked),
        (X, {C, R, D}, RelayRevoked),
        (Z, {U}, RelayClosed),
        (Z, {X}, RelayClosed),
    ],
)
async def test_a_wait_that_can_never_end_well_raises_at_once(
    autojump_clock: trio.testing.MockClock,
    state: State,
    wanted: set[State],
    error: type[Exception],
) -> None:
    feed = StateFeed(state)
    start = trio.current_time()
    with pytest.raises(error):
        await feed.wait_for(frozenset(wanted), timeout=60)
    assert trio.current_time() == start


async def test_waiting_for_closed_while_revoked_is_fine(
    autojump_clock: trio.testing.MockClock,
) -> None:
    feed = StateFeed(X)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _publish_after(feed, 1, Change(X, Z, "relay closed")))
        assert await feed.wait_for(frozenset({Z}), timeout=5) is Z


async def test_a_wait_ends_when_the_target_becomes_unreachable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    feed = StateFeed(R)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _publish_after(feed, 1, Change(R, X, "revoked")))
        with pytest.raises(RelayRevoked):
            await feed.wait_for(frozenset({U}), timeout=None)


async def test_wait_for_needs_a_state() -> None:
    with pytest.raises(ValueError, match="at least one"):
        await StateFeed(C).wait_for(frozenset(), timeout=None)


async def _publish_after(feed: StateFeed, delay: float, change: Change) -> None:
    await trio.sleep(delay)
    feed.publish(change)
