"""Write committed keys behind, off the event loop, for a store whose writes block.

`DedupeWriter` wraps a blocking `KeyFile` (the SQLite file). Committed keys
are queued synchronously (`DedupeWriter.add`, callable from any task without
awaiting) and written in batches by one task through ``trio.to_thread.run_sync``, so the
disk never blocks the event loop and never sees two writers.

Why writing *behind* the ack is safe: a key acked but not yet on disk when the process
dies is not replayed (the connector had the ack); a key on disk but not acked is replayed
and then dropped. Either order loses nothing, so the ack never waits for the disk.

The queue keeps only the newest ``capacity`` keys: older ones would be trimmed from the
file by the same write anyway, and this bounds memory if the disk stalls.

Every thread call may be abandoned on cancellation (the file's own lock keeps a
late-finishing call safe), and the final flush on shutdown is bounded by
``flush_timeout``, so a hung disk cannot hold the relay open.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import deque
from collections.abc import Iterable
from typing import Protocol

import trio

__all__ = ["DedupeWriter", "KeyFile"]

logger = logging.getLogger("trio_relay")


def error_fields(exc: BaseException) -> dict[str, object]:
    """The ``cause`` and ``errno`` log fields of a store's error."""
    return {"cause": type(exc).__name__, "errno": getattr(exc, "errno", None)}


class KeyFile(Protocol):
    """Blocking key storage; each method is called in a worker thread, one at a time."""

    def load(self) -> list[str]: ...

    def add(self, keys: Iterable[str]) -> None: ...

    def close(self) -> None: ...


class DedupeWriter:
    """Queues committed keys and writes them to ``file`` from `run`."""

    def __init__(self, file: KeyFile, capacity: int, flush_timeout: float) -> None:
        self._file = file
        self._pending: deque[str] = deque(maxlen=capacity)
        self._wakeup = trio.Event()
        self._flush_timeout = flush_timeout

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
                scope.deadline = trio.current_time() + self._flush_timeout
                await self._flush()
                await trio.to_thread.run_sync(self._file.close, abandon_on_cancel=True)
            if scope.cancelled_caught:
                logger.error(
                    "inbound: dedupe store not flushed within %g s; recent "
                    "keys may be replayed after a restart",
                    self._flush_timeout,
                    extra={"cause": "flush timeout"},
                )

    async def _flush(self) -> None:
        if not self._pending:
            return
        # Taken before the await: keys committed meanwhile go in the next batch.
        batch = list(self._pending)
        self._pending.clear()
        try:
            await trio.to_thread.run_sync(self._file.add, batch, abandon_on_cancel=True)
        except trio.Cancelled:
            # The abandoned call may still land, or not (close() may take the file's
            # lock first): the final flush writes the batch again (adding is idempotent).
            # Back in front of the keys committed meanwhile, and rebuilt rather than
            # ``extendleft``: on a full queue that would push out the newest keys,
            # which must win (they are the ones a restart would handle again).
            self._pending = deque([*batch, *self._pending], maxlen=self._pending.maxlen)
            raise
        except (sqlite3.Error, OSError) as exc:
            # They stay deduped in memory; only a restart could replay them.
            logger.exception("inbound: could not persist %d dedupe keys", len(batch),
                             extra=error_fields(exc))
