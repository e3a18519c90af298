"""The probes of trio_relay.testing: tasks, file descriptors, resident memory."""

from __future__ import annotations

import sys

import pytest
import trio

from trio_relay.testing import live_tasks, open_fds, rss_bytes, trim_heap

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


async def test_live_tasks_sees_a_running_child_and_forgets_it_once_done() -> None:
    before = live_tasks()
    started = trio.Event()
    release = trio.Event()
    child: list[trio.lowlevel.Task] = []

    async def sleeper() -> None:
        child.append(trio.lowlevel.current_task())
        started.set()
        await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await started.wait()
        during = live_tasks()
        assert child[0] in during and child[0] not in before
        assert trio.lowlevel.current_task() in during
        release.set()
    assert live_tasks() == before


def test_live_tasks_outside_trio_says_so() -> None:
    with pytest.raises(RuntimeError, match=r"inside trio\.run"):
        live_tasks()


@linux_only
def test_open_fds_counts_a_file_while_it_is_open() -> None:
    before = open_fds()
    assert before is not None
    with open(__file__, "rb"):
        assert open_fds() == before + 1
    assert open_fds() == before


@linux_only
def test_rss_bytes_sees_memory_touched_and_trimmed() -> None:
    trim_heap()
    before = rss_bytes()
    assert before is not None and before > 0
    block = bytearray(64 << 20)  # zero-filled: every page touched
    during = rss_bytes()
    assert during is not None and during - before >= 48 << 20
    del block
    after = rss_bytes(trim=True)
    assert after is not None and after < during - (32 << 20)
