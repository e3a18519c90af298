"""Dedupe set, attempt counter and durable store: sans-I/O, no Trio."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.dedupe import AttemptCounter, Claim, DedupeSet
from trio_relay._trio.dedupe_store import SqliteDedupeStore

# --- DedupeSet --------------------------------------------------------------------------


def test_claim_new_then_in_progress_then_done() -> None:
    d = DedupeSet(4)
    assert d.claim("k") is Claim.NEW
    assert d.claim("k") is Claim.IN_PROGRESS
    assert "k" not in d  # claimed is not committed
    d.commit("k")
    assert "k" in d
    assert d.claim("k") is Claim.DONE
    assert d.claimed == frozenset()


def test_release_lets_the_redelivery_run() -> None:
    # The bug this replaces: marking seen *before* handling lost a failed message.
    d = DedupeSet(4)
    assert d.claim("k") is Claim.NEW
    d.release("k")
    assert d.claim("k") is Claim.NEW


def test_release_never_undoes_a_commit() -> None:
    d = DedupeSet(4)
    d.claim("k")
    d.commit("k")
    d.release("k")
    assert d.claim("k") is Claim.DONE


def test_release_of_unknown_key_is_harmless() -> None:
    d = DedupeSet(1)
    d.release("nope")
    assert d.claim("nope") is Claim.NEW


def test_fifo_eviction_of_committed_keys() -> None:
    d = DedupeSet(2)
    for key in "abc":
        d.claim(key)
    assert d.commit("a") == []
    assert d.commit("b") == []
    assert d.commit("c") == ["a"]
    assert len(d) == 2
    assert d.claim("a") is Claim.NEW  # forgotten
    assert d.claim("b") is Claim.DONE
    assert d.claim("c") is Claim.DONE


def test_recommit_does_not_refresh_age() -> None:
    d = DedupeSet(2)
    d.commit("a")
    d.commit("b")
    assert d.commit("a") == []
    assert d.commit("c") == ["a"]  # "a" is still the oldest


def test_claimed_keys_are_never_evicted() -> None:
    # Evicting a claim would let a copy run beside its original.
    d = DedupeSet(1)
    d.claim("in-flight")
    d.commit("x")
    d.commit("y")
    assert d.claim("in-flight") is Claim.IN_PROGRESS


def test_load_commits_in_order_and_stays_bounded() -> None:
    d = DedupeSet(2)
    d.load(["a", "b", "c"])
    assert len(d) == 2
    assert "a" not in d and "b" in d and "c" in d


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_capacity_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError):
        DedupeSet(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AttemptCounter(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SqliteDedupeStore(":memory:", bad)  # type: ignore[arg-type]


_ops = st.lists(
    st.tuples(st.sampled_from(["claim", "commit", "release"]), st.sampled_from("abcdef")),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 4), ops=_ops)
def test_matches_a_reference_model(capacity: int, ops: list[tuple[str, str]]) -> None:
    d = DedupeSet(capacity)
    claimed: set[str] = set()
    done: list[str] = []  # oldest first
    for op, key in ops:
        if op == "claim":
            expected = (
                Claim.DONE if key in done else Claim.IN_PROGRESS if key in claimed else Claim.NEW
            )
            assert d.claim(key) is expected
            if expected is Claim.NEW:
                claimed.add(key)
        elif op == "commit":
            claimed.discard(key)
            evicted: list[str] = []
            if key not in done:
                done.append(key)
                while len(done) > capacity:
                    evicted.append(done.pop(0))
            assert d.commit(key) == evicted
        else:
            claimed.discard(key)
            d.release(key)
        assert len(d) == len(done) <= capacity
        assert d.claimed == claimed


# --- AttemptCounter ---------------------------------------------------------------------


def test_attempts_count_and_forget() -> None:
    a = AttemptCounter(4)
    assert a.get("k") == 0
    assert a.record_failure("k") == 1
    assert a.record_failure("k") == 2
    assert a.get("k") == 2
    a.forget("k")
    assert a.get("k") == 0
    a.forget("never")  # harmless


def test_attempts_bounded_keeping_most_recent_failures() -> None:
    a = AttemptCounter(2)
    a.record_failure("a")
    a.record_failure("b")
    a.record_failure("a")  # "a" failed most recently now
    a.record_failure("c")  # evicts "b", the least recently failing
    assert len(a) == 2
    assert a.get("a") == 2 and a.get("b") == 0 and a.get("c") == 1


# --- SqliteDedupeStore ------------------------------------------------------------------


def test_store_round_trip_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "dedupe.sqlite"
    store = SqliteDedupeStore(path, 10)
    assert store.load() == []
    store.add(["a", "b"])
    store.add(["c"])
    store.close()
    again = SqliteDedupeStore(str(path), 10)
    assert again.load() == ["a", "b", "c"]
    again.close()


def test_store_is_bounded_dropping_oldest(tmp_path: Path) -> None:
    store = SqliteDedupeStore(tmp_path / "d.sqlite", 3)
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
    store = SqliteDedupeStore(tmp_path / "d.sqlite", 3)
    store.add(["a", "b", "a"])
    store.add(["c", "b", "d"])
    assert store.load() == ["b", "c", "d"]  # "a" was oldest; "b" not moved
    store.close()


def test_store_smaller_capacity_takes_effect_on_load(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    big = SqliteDedupeStore(path, 10)
    big.add(list("abcdef"))
    big.close()
    small = SqliteDedupeStore(path, 2)
    assert small.load() == ["e", "f"]
    small.close()


def test_store_empty_add_and_double_close(tmp_path: Path) -> None:
    store = SqliteDedupeStore(tmp_path / "d.sqlite", 2)
    store.add([])
    assert not (tmp_path / "d.sqlite").exists()  # nothing opened for nothing
    store.close()
    store.close()


def test_store_usable_from_other_threads(tmp_path: Path) -> None:
    # trio.to_thread runs each call on whichever worker thread is free.
    import threading

    store = SqliteDedupeStore(tmp_path / "d.sqlite", 10)
    store.load()
    t = threading.Thread(target=store.add, args=(["x"],))
    t.start()
    t.join()
    assert store.load() == ["x"]
    store.close()


def test_store_rejects_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db"
    path.write_bytes(b"this is not sqlite, just some bytes " * 10)
    store = SqliteDedupeStore(path, 2)
    with pytest.raises(sqlite3.DatabaseError):
        store.load()
    store.close()


def test_store_rejects_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    store = SqliteDedupeStore(path, 2)
    with pytest.raises(sqlite3.DatabaseError, match="schema version 99"):
        store.load()
    store.close()
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []  # refused, never altered
