"""SqliteDedupeStore behind the pipeline: replays dropped across a restart, a bounded file,
and a disk that is slow, hung or failing (injected through the store's ``open_file``
seam, never by patching).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import pytest
import trio
import trio.testing
from inbound_support import (
    Recorder,
    eventually,
    msg,
    running,
)

from trio_relay import SqliteDedupeStore

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


# The window is never smaller than what the pipeline holds (queue + running).
WINDOW_2 = {"dedupe_size": 2, "max_inbound_queue": 1, "max_concurrent_handlers": 1}


async def test_durable_dedupe_is_bounded(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    async with running(on_message=Recorder(), dedupe_path=path, **WINDOW_2) as h:
        for i in range(3):
            h.feed(msg(mid=str(i), buffer=f"b{i}"))
            await eventually(lambda i=i: len(h.acks) == i + 1)
    rec = Recorder()
    async with running(on_message=rec, dedupe_path=path, **WINDOW_2) as h2:
        for n, i in enumerate((1, 2, 0)):  # the kept ones first: 0 evicts 1 locally
            h2.feed(msg(mid=str(i), buffer=f"c{i}"))
            await eventually(lambda n=n: len(h2.acks) == n + 1)
        assert rec.keys == ["slack:C1:0"]  # the oldest was forgotten


async def test_failed_or_cancelled_handling_is_not_persisted(tmp_path: Path) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    rec = Recorder()
    rec.fail_next = 10**6  # in its retry backoff when the block is left
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


class KeyFile(Protocol):
    """What ``SqliteDedupeStore.open_file`` returns: the blocking file."""

    def load(self) -> list[str]: ...

    def add(self, keys: Iterable[str]) -> None: ...

    def close(self) -> None: ...


class WatchedFile:
    """The real SQLite file, with each blocking call recorded and optionally replaced."""

    def __init__(
        self,
        inner: KeyFile,
        add: Callable[[list[str]], None] | None,
        close: Callable[[], None] | None,
    ) -> None:
        self.inner = inner
        self.replace_add = add
        self.replace_close = close
        self.add_threads: list[threading.Thread] = []

    def load(self) -> list[str]:
        return self.inner.load()

    def add(self, keys: Any) -> None:
        self.add_threads.append(threading.current_thread())
        (self.replace_add or self.inner.add)(list(keys))

    def close(self) -> None:
        (self.replace_close or self.inner.close)()
        self.inner.close()


class WatchedStore(SqliteDedupeStore):
    """A SqliteDedupeStore injected through RelayConfig(dedupe_store=...), through its
    ``open_file`` seam: no patching of the real class."""

    def __init__(
        self,
        path: Path,
        add: Callable[[list[str]], None] | None = None,
        close: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path, **kwargs)
        self.replace_add = add
        self.replace_close = close
        self.files: list[WatchedFile] = []

    def open_file(self, capacity: int) -> WatchedFile:
        file = WatchedFile(
            super().open_file(capacity), self.replace_add, self.replace_close
        )
        self.files.append(file)
        return file


async def test_store_writes_run_off_the_event_loop(tmp_path: Path) -> None:
    store = WatchedStore(tmp_path / "d.sqlite")
    async with running(on_message=Recorder(), dedupe_store=store) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: bool(store.files[0].add_threads))
    assert threading.main_thread() not in store.files[0].add_threads


async def test_a_hung_disk_cannot_hold_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = threading.Event()
    def hang(*args: object) -> None:  # every call to the disk blocks
        stuck.wait(10)

    store = WatchedStore(tmp_path / "d", add=hang, close=hang, flush_timeout=0.2)
    try:
        with trio.fail_after(3):
            async with running(on_message=Recorder(), dedupe_store=store) as h:
                h.feed(msg(buffer="b1"))
                await eventually(lambda: h.acks == ["b1"])
        assert "not flushed within" in caplog.text
    finally:
        stuck.set()  # let the abandoned worker thread finish


async def test_store_write_failure_keeps_memory_dedupe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(keys: list[str]) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    rec = Recorder()
    store = WatchedStore(tmp_path / "d.sqlite", add=broken)
    async with running(on_message=rec, dedupe_store=store) as h:
        h.feed(msg(buffer="b1"))
        await eventually(lambda: "could not persist" in caplog.text)
        h.feed(msg(buffer="b1"))
        await eventually(lambda: len(h.acks) == 2)
        assert len(rec.seen) == 1


async def test_a_write_cut_off_by_shutdown_is_written_by_the_final_flush(
    tmp_path: Path,
) -> None:
    # The first write hangs in its worker thread when the relay closes; that call is
    # abandoned (it may land or not), so the final flush must write its keys again.
    path = tmp_path / "d.sqlite"
    stuck = threading.Event()
    calls: list[list[str]] = []
    inner_adds: list[Callable[[list[str]], None]] = []

    def first_hangs(keys: list[str]) -> None:
        calls.append(keys)
        if len(calls) == 1:
            stuck.wait(10)  # never writes
        else:
            inner_adds[0](keys)

    store = WatchedStore(path, add=first_hangs)
    try:
        async with running(on_message=Recorder(), dedupe_store=store) as h:
            inner_adds.append(lambda keys: store.files[0].inner.add(keys))
            h.feed(msg(buffer="b1"))
            await eventually(lambda: len(calls) == 1)
    finally:
        stuck.set()
    again = SqliteDedupeStore(path).open_file(10)
    assert again.load() == ["slack:C1:m1"]
    again.close()


async def test_a_cut_off_write_requeued_at_shutdown_keeps_the_newest_keys(
    tmp_path: Path,
) -> None:
    # The queue holds at most the window (2 here). The first write ("0") hangs; "1"
    # and "2" fill the queue behind it. When the relay closes, the abandoned batch goes
    # back in front of them, and what the queue cannot hold must be the oldest ("0"),
    # never the newest: a dropped "2" would be handled again after the restart.
    path = tmp_path / "d.sqlite"
    stuck = threading.Event()
    calls: list[list[str]] = []
    inner_adds: list[Callable[[list[str]], None]] = []

    def first_hangs(keys: list[str]) -> None:
        calls.append(keys)
        if len(calls) == 1:
            stuck.wait(10)  # never writes
        else:
            inner_adds[0](keys)

    store = WatchedStore(path, add=first_hangs)
    try:
        async with running(on_message=Recorder(), dedupe_store=store, **WINDOW_2) as h:
            inner_adds.append(lambda keys: store.files[0].inner.add(keys))
            h.feed(msg(mid="0", buffer="b0"))
            await eventually(lambda: len(calls) == 1)
            for i in (1, 2):
                h.feed(msg(mid=str(i), buffer=f"b{i}"))
                await eventually(lambda i=i: len(h.acks) == i + 1)
    finally:
        stuck.set()
    assert calls[1:] == [["slack:C1:1", "slack:C1:2"]]  # the final flush
    again = SqliteDedupeStore(path).open_file(2)
    assert again.load() == ["slack:C1:1", "slack:C1:2"]
    again.close()
