"""The stall guards: the async one on a mock clock, the blocking one with threads."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing

import pytest
import trio

from trio_relay import StreamStalled
from trio_relay.http import stall_timeout, sync_stall_timeout

# --- stall_timeout, on a mock clock -----------------------------------------------------


async def _paced(gaps: list[float], *, then_stall: bool = False) -> AsyncIterator[int]:
    for number, gap in enumerate(gaps):
        await trio.sleep(gap)
        yield number
    if then_stall:
        await trio.sleep_forever()


async def test_stall_raises_after_the_quiet_time_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[tuple[int, float]] = []
    start = trio.current_time()
    with pytest.raises(StreamStalled, match=r"no data arrived for 3 s") as caught:
        async for number in stall_timeout(_paced([2.9, 2.9], then_stall=True), 3):
            received.append((number, trio.current_time() - start))
    assert [number for number, _ in received] == [0, 1]
    assert [at for _, at in received] == pytest.approx([2.9, 5.8])
    assert trio.current_time() - start == pytest.approx(5.8 + 3)
    assert caught.value.seconds == 3


async def test_stall_before_the_first_item(autojump_clock: trio.testing.MockClock) -> None:
    with pytest.raises(StreamStalled):
        async for _ in stall_timeout(_paced([], then_stall=True), 10):
            pass
    assert trio.current_time() == pytest.approx(10)


async def test_steady_stream_with_a_slow_consumer_does_not_raise(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received = []
    async for number in stall_timeout(_paced([2.9] * 5), 3):
        received.append(number)
        # The consumer's own time must not count as the producer's silence.
        await trio.sleep(10)
    assert received == [0, 1, 2, 3, 4]


async def test_the_wrapped_iterator_is_closed_on_early_exit() -> None:
    closed = trio.Event()

    async def source() -> AsyncIterator[int]:
        try:
            for number in range(10):
                yield number
        finally:
            closed.set()

    wrapped = stall_timeout(source(), 5)
    async with aclosing(wrapped):
        async for number in wrapped:
            if number == 2:
                break
    assert closed.is_set()


async def test_iterators_without_aclose_work() -> None:
    class Countdown:
        def __init__(self) -> None:
            self.left = 3

        def __aiter__(self) -> Countdown:
            return self

        async def __anext__(self) -> int:
            if not self.left:
                raise StopAsyncIteration
            self.left -= 1
            return self.left

    assert [n async for n in stall_timeout(Countdown(), 1)] == [2, 1, 0]


async def test_non_positive_stall_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="seconds > 0"):
        async for _ in stall_timeout(_paced([0]), 0):
            pass


# --- sync_stall_timeout ------------------------------------------------------------------


class BlockingSource:
    """Yields ``items``, then blocks until closed (a stream whose peer went quiet)."""

    def __init__(self, items: list[int]) -> None:
        self.items = items
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[int]:
        yield from self.items
        self.closed.wait()

    def close(self) -> None:
        self.closed.set()


def test_sync_stall_raises_after_the_items_and_closes_the_source() -> None:
    source = BlockingSource([1, 2, 3])
    received: list[int] = []
    with pytest.raises(StreamStalled, match=r"no data arrived for 0\.05 s"):
        for item in sync_stall_timeout(source, 0.05):
            received.append(item)
    assert received == [1, 2, 3]
    assert source.closed.is_set()


def test_sync_stall_passes_a_finite_stream_whole() -> None:
    assert list(sync_stall_timeout(iter(range(100)), 5)) == list(range(100))


def test_sync_stall_reraises_the_source_error() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise ConnectionResetError("peer reset")

    with pytest.raises(ConnectionResetError, match="peer reset"):
        list(sync_stall_timeout(failing(), 5))


def test_sync_stall_closes_the_source_on_early_exit() -> None:
    source = BlockingSource([1, 2, 3])
    guarded = sync_stall_timeout(source, 5)
    assert next(guarded) == 1
    guarded.close()
    assert source.closed.is_set()


def test_sync_stall_rejects_non_positive_seconds() -> None:
    with pytest.raises(ValueError, match="seconds > 0"):
        next(sync_stall_timeout([1], 0))
