"""The Trio side of the durable dedupe store: load once, then write behind, off the loop.

:class:`DedupeWriter` wraps a blocking :class:`~trio_relay._trio.dedupe_store.SqliteDedupeStore`.
Committed keys are queued synchronously (:meth:`DedupeWriter.add`, callable from any
task without awaiting) and written in batches by one task through
``trio.to_thread.run_sync``, so SQLite never blocks the event loop and never sees two
writers.

Why writing *behind* the ack is safe: a key acked but not yet on disk when the process
dies is not replayed (the connector had the ack); a key on disk but not acked is replayed
and then dropped. Either order loses nothing, so the ack never waits for the disk.

The queue keeps only the newest ``capacity`` keys: older ones would be trimmed from the
store by the same write anyway, and this bounds memory if the disk stalls.

Every thread call may be abandoned on cancellation (the store's own lock keeps a
late-finishing call safe), and the final flush on shutdown is bounded by
``FINAL_FLUSH_TIMEOUT``, so a hung disk cannot hold the relay open.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import deque

import trio

from .dedupe_store import SqliteDedupeStore

__all__ = ["FINAL_FLUSH_TIMEOUT", "DedupeWriter"]

logger = logging.getLogger("trio_relay")

FINAL_FLUSH_TIMEOUT = 1.0
"""Seconds the last write and the close may take when the pipeline is cancelled."""


class DedupeWriter:
    """Queues committed keys and writes them to ``store`` from :meth:`run`."""

    def __init__(self, store: SqliteDedupeStore, capacity: int) -> None:
        self._store = store
        self._pending: deque[str] = deque(maxlen=capacity)
        self._wakeup = trio.Event()

    @classmethod
    async def open(cls, path: str, capacity: int) -> tuple[DedupeWriter, list[str]] | None:
        """Open the store at ``path`` and load its keys (oldest first); ``None`` (logged
        at error) if the store is unusable."""
        store = SqliteDedupeStore(path, capacity)
        try:
            keys = await trio.to_thread.run_sync(store.load, abandon_on_cancel=True)
        except (sqlite3.Error, OSError):
            logger.exception("inbound: dedupe store %r unusable; dedupe is memory-only", path)
            await trio.to_thread.run_sync(store.close, abandon_on_cancel=True)
            return None
        logger.debug("inbound: loaded %d dedupe keys from %r", len(keys), path)
        return cls(store, capacity), keys

    def add(self, key: str) -> None:
        """Queue ``key`` for the next write. Never blocks."""
        self._pending.append(key)
        self._wakeup.set()

    async def run(self) -> None:
        """Write queued keys until cancelled; then flush what is left and close."""
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                await self._flush()
        finally:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + FINAL_FLUSH_TIMEOUT
                await self._flush()
                await trio.to_thread.run_sync(self._store.close, abandon_on_cancel=True)
            if scope.cancelled_caught:
                logger.error(
                    "inbound: dedupe store not flushed within %g s; recent "
                    "keys may be replayed after a restart",
                    FINAL_FLUSH_TIMEOUT,
                )

    async def _flush(self) -> None:
        if not self._pending:
            return
        # Taken before the await: keys committed meanwhile go in the next batch.
        batch = list(self._pending)
        self._pending.clear()
        try:
            await trio.to_thread.run_sync(self._store.add, batch, abandon_on_cancel=True)
        except (sqlite3.Error, OSError):
            # They stay deduped in memory; only a restart could replay them.
            logger.exception("inbound: could not persist %d dedupe keys", len(batch))
