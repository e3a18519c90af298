"""``SqliteDedupeStore``: handled keys in a SQLite file, so a restart still drops replays.

The newest ``capacity`` committed keys (the pipeline's window) are kept in the file at
``path``, loaded once when the relay starts and written behind the acks (see
``dedupe_writer.py``). One relay per file: it is the memory of *one* gateway process
across restarts on the same disk (a persistent volume), not a store for replicas (use
Redis for those). A file that cannot be opened is logged at error and the relay runs
with memory-only dedupe: handling messages beats refusing them.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import trio

from ..._core.dedupe import Claim
from ..._core.dedupe_store import DedupeSession
from ..._core.stats import RelayStats
from .key_file import SqliteKeyFile
from .writer import DedupeWriter, KeyFile, error_fields

__all__ = ["SqliteDedupeStore"]

logger = logging.getLogger("trio_relay")


class _Session:
    def __init__(self, keys: list[str], writer: DedupeWriter | None) -> None:
        self._keys = keys
        self._writer = writer

    async def load_recent(self) -> list[str]:
        keys, self._keys = self._keys, []
        return keys

    async def claim(self, key: str) -> Claim:
        # One relay per file: the loaded keys are in the pipeline's own set already.
        return Claim.NEW

    def commit(self, key: str) -> None:
        if self._writer is not None:
            self._writer.add(key)

    def release(self, key: str) -> None:
        pass  # nothing was written for a claim


class SqliteDedupeStore:
    """Committed keys in the SQLite file ``path`` (created on first use; its directory
    must exist). ``flush_timeout`` bounds the last write when the relay closes."""

    def __init__(self, path: str | os.PathLike[str], *, flush_timeout: float = 1.0) -> None:
        self.path = os.fspath(path)
        if not flush_timeout > 0:
            raise ValueError(f"flush_timeout must be positive, got {flush_timeout!r}")
        self.flush_timeout = flush_timeout

    def __repr__(self) -> str:
        return f"SqliteDedupeStore({self.path!r})"

    def open_file(self, capacity: int) -> KeyFile:
        """The blocking file behind the store (a seam: a subclass may wrap it to watch
        or fault its calls, which run in worker threads), holding at most ``capacity``
        keys."""
        return SqliteKeyFile(self.path, capacity)

    def open(
        self, *, namespace: str, capacity: int, stats: RelayStats
    ) -> AbstractAsyncContextManager[DedupeSession]:
        return self._session(capacity)

    @asynccontextmanager
    async def _session(self, capacity: int) -> AsyncIterator[DedupeSession]:
        file = self.open_file(capacity)
        try:
            keys = await trio.to_thread.run_sync(file.load, abandon_on_cancel=True)
        except (sqlite3.Error, OSError) as exc:
            logger.exception("inbound: dedupe store %r unusable; dedupe is memory-only",
                             self.path, extra=error_fields(exc))
            await trio.to_thread.run_sync(file.close, abandon_on_cancel=True)
            yield _Session([], None)
            return
        logger.debug("inbound: loaded %d dedupe keys from %r", len(keys), self.path)
        writer = DedupeWriter(file, capacity, self.flush_timeout)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            yield _Session(keys, writer)
            nursery.cancel_scope.cancel()
