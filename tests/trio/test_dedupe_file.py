"""The SQLite file behind ``SqliteDedupeStore``: blocking calls, no event loop.

Each file is the one the store itself would use, from its ``open_file`` seam."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from trio_relay import SqliteDedupeStore


def key_file(path: str | Path, capacity: int) -> Any:
    """The store's own blocking file for ``path`` (``load``, ``add``, ``close``)."""
    return SqliteDedupeStore(path).open_file(capacity)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_capacity_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError):
        key_file(":memory:", bad)  # type: ignore[arg-type]


# --- the key file (blocking; the Trio side runs it in worker threads) ---------------


def test_store_round_trip_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "dedupe.sqlite"
    store = key_file(path, 10)
    assert store.load() == []
    store.add(["a", "b"])
    store.add(["c"])
    store.close()
    again = key_file(str(path), 10)
    assert again.load() == ["a", "b", "c"]
    again.close()


def test_store_is_bounded_dropping_oldest(tmp_path: Path) -> None:
    store = key_file(tmp_path / "d.sqlite", 3)
    store.load()
    store.add(["a", "b"])
    store.add(["c", "d", "e"])
    assert store.load() == ["c", "d", "e"]
    (count,) = sqlite3.connect(tmp_path / "d.sqlite").execute(
        "SELECT COUNT(*) FROM dedupe_keys"
    ).fetchone()
    assert count == 3  # trimmed on disk, not just on load
    store.close()


def test_store_duplicate_keeps_first_position(tmp_path: Path) -> None:
    store = key_file(tmp_path / "d.sqlite", 3)
    store.add(["a", "b", "a"])
    store.add(["c", "b", "d"])
    assert store.load() == ["b", "c", "d"]  # "a" was oldest; "b" not moved
    store.close()


def test_store_smaller_capacity_takes_effect_on_load(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    big = key_file(path, 10)
    big.add(list("abcdef"))
    big.close()
    small = key_file(path, 2)
    assert small.load() == ["e", "f"]
    small.close()


def test_store_empty_add_and_double_close(tmp_path: Path) -> None:
    store = key_file(tmp_path / "d.sqlite", 2)
    store.add([])
    assert not (tmp_path / "d.sqlite").exists()  # nothing opened for nothing
    store.close()
    store.close()


def test_store_usable_from_other_threads(tmp_path: Path) -> None:
    # trio.to_thread runs each call on whichever worker thread is free.
    import threading

    store = key_file(tmp_path / "d.sqlite", 10)
    store.load()
    t = threading.Thread(target=store.add, args=(["x"],))
    t.start()
    t.join()
    assert store.load() == ["x"]
    store.close()


def test_store_rejects_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db"
    path.write_bytes(b"this is not sqlite, just some bytes " * 10)
    store = key_file(path, 2)
    with pytest.raises(sqlite3.DatabaseError):
        store.load()
    store.close()


def test_store_rejects_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    store = key_file(path, 2)
    with pytest.raises(sqlite3.DatabaseError, match="schema version 99"):
        store.load()
    store.close()
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []  # refused, never altered
