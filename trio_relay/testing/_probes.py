"""Probes for what a test, a benchmark or the soak must find back where it started:
open file descriptors, live Trio tasks, resident memory.

They read the process's own state (``/proc/self`` on Linux) and change nothing, so
they can be called before and after any block::

    from trio_relay.testing import live_tasks, open_fds, rss_bytes

    fds, tasks = open_fds(), live_tasks()
    async with trio_relay.open_relay(url) as relay:
        ...
    assert open_fds() == fds and live_tasks() <= tasks
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os

import trio

__all__ = ["live_tasks", "open_fds", "rss_bytes", "trim_heap"]


def open_fds() -> int | None:
    """How many file descriptors this process holds (Linux), else None."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def live_tasks() -> set[trio.lowlevel.Task]:
    """Every task of the current Trio run below the root task, the root included
    (system tasks are not). Call it from inside ``trio.run``."""
    try:
        root = trio.lowlevel.current_root_task()
    except RuntimeError:
        root = None
    if root is None:
        raise RuntimeError("live_tasks() must be called inside trio.run")
    seen: set[trio.lowlevel.Task] = set()
    stack = [root]
    while stack:
        task = stack.pop()
        seen.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return seen


def trim_heap() -> None:
    """Collect garbage and hand freed heap back to the OS (glibc's ``malloc_trim``), so
    that resident size measures live memory, not what the allocator keeps for reuse
    after a burst. A no-op where there is no ``malloc_trim``."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def rss_bytes(*, trim: bool = False) -> int | None:
    """This process's resident set size in bytes (``VmRSS`` of ``/proc/self/status``),
    or None where that cannot be read. ``trim``: [`trim_heap`][trio_relay.testing.trim_heap]
    first."""
    if trim:
        trim_heap()
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
