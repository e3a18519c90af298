"""Committed dedupe keys on disk, so a restarted gateway still drops replays.

A plain SQLite file through the standard library: one table of keys in commit order,
trimmed to the newest ``capacity`` after every write, so the file stays bounded like the
in-memory set it backs. The methods are blocking; the Trio side calls them through
``trio.to_thread.run_sync``, one call at a time (the inbound pipeline has a single
writer task). A lock still guards the connection, since the thread that runs each call
differs and sqlite3 connections must not be used concurrently.

One relay per file: two processes sharing a path would each trim the other's keys.
[`SqliteDedupeStore`][trio_relay.SqliteDedupeStore] is the public store around it.

Sans-Trio: no event loop here.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable

__all__ = ["SqliteKeyFile"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS dedupe_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE
)
"""
# Rows older than the newest ``capacity``: the subquery names the newest row that must
# go (NULL when there are not more than ``capacity`` rows, which deletes nothing).
_TRIM = """
DELETE FROM dedupe_keys WHERE seq <= (
    SELECT seq FROM dedupe_keys ORDER BY seq DESC LIMIT 1 OFFSET ?
)
"""
_LOAD = """
SELECT key FROM (SELECT seq, key FROM dedupe_keys ORDER BY seq DESC LIMIT ?) ORDER BY seq
"""


class SqliteKeyFile:
    """The newest ``capacity`` committed keys, oldest first, in the SQLite file ``path``.

    The file (not its directory) is created on `load`. Errors are
    ``sqlite3.Error`` (or ``OSError``); the caller decides what losing durability means.
    """

    def __init__(self, path: str | os.PathLike[str], capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self._path = os.fspath(path)
        self._capacity = capacity
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._closed = False  # an abandoned call finishing after close() writes nothing

    @property
    def path(self) -> str:
        return self._path

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            # check_same_thread=False: each to_thread call may land on another worker
            # thread; self._lock serialises them instead.
            db = sqlite3.connect(self._path, check_same_thread=False)
            try:
                # Checked before anything is written: a file of another schema (or
                # another program) is refused, never altered.
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, _SCHEMA_VERSION):
                    raise sqlite3.DatabaseError(
                        f"dedupe store {self._path!r} has schema version {version}, "
                        f"expected {_SCHEMA_VERSION}"
                    )
                with db:
                    db.execute(_SCHEMA)
                    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def load(self) -> list[str]:
        """Open (creating if needed) and return the stored keys, oldest first."""
        with self._lock:
            db = self._connect()
            with db:
                # A smaller capacity than last run's takes effect at once.
                db.execute(_TRIM, (self._capacity,))
            return [row[0] for row in db.execute(_LOAD, (self._capacity,))]

    def add(self, keys: Iterable[str]) -> None:
        """Append ``keys`` (already-stored ones keep their place) in one transaction,
        then trim to the newest ``capacity``."""
        batch = [(key,) for key in keys]
        if not batch:
            return
        with self._lock:
            if self._closed:
                return
            db = self._connect()
            with db:
                db.executemany("INSERT OR IGNORE INTO dedupe_keys (key) VALUES (?)", batch)
                db.execute(_TRIM, (self._capacity,))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None
