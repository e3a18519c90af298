"""Dedupe set, attempt counter and durable store: sans-I/O, no Trio."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.dedupe import Claim, DedupeSet

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
