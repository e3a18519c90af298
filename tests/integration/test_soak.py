"""The chaos soak's short form (the full one: ``trio-relay soak --seconds 600``).

Seven seconds of faults (resets, 1011/1001/1006 closes, silence, refused upgrades,
delayed results, restarts) under concurrent requesters, bursts and buffered deliveries;
then every invariant of ``trio_relay_benchmarks.soak`` must hold. The harness seed is
random per run and printed with the table on failure; set ``TRIO_RELAY_SOAK_SEED`` to
replay a run's choices (the network's timing is never exactly the same).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
from concurrent.futures import ProcessPoolExecutor

import pytest
from redis_support import RedisServer, redis_server
from trio_relay_benchmarks.soak import FAULTS, Invariant, SoakReport, run_soak

from trio_relay.cli import import_benchmarks

SECONDS = 7.0

__all__ = ["redis_server"]  # a fixture, used below


def _short_soak(
    seed: int | None, seconds: float, dedupe: str | None, idempotency: bool = False
) -> SoakReport:
    return run_soak(
        seconds,
        seed=seed,
        fault_interval=0.5,
        watchdog_grace=60.0,
        dedupe=dedupe,
        idempotency=idempotency,
    )


def _in_fresh_interpreter(
    seconds: float, dedupe: str | None = None, idempotency: bool = False
) -> SoakReport:
    """The soak checks this process's file descriptors and resident memory, which the
    suite's earlier tests would otherwise have shaped: run it in an interpreter of its
    own."""
    seed_text = os.environ.get("TRIO_RELAY_SOAK_SEED")
    seed = int(seed_text) if seed_text else None
    # The child imports this module to find ``_short_soak``, and this module imports the
    # benchmarks, which are a directory of the checkout, not an installed package: the
    # initializer registers them there as conftest.py does here.
    with ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=import_benchmarks,
        initargs=("soak",),
    ) as pool:
        return pool.submit(_short_soak, seed, seconds, dedupe, idempotency).result()


@pytest.mark.slow
def test_short_soak_holds_every_invariant() -> None:
    report = _in_fresh_interpreter(SECONDS)
    table = report.render()
    assert report.ok, table
    assert report.requests > 50, table  # alive, not a speed claim
    assert sum(report.faults.values()) >= 5, table
    assert report.deliveries > 50 and report.handled == report.deliveries, table
    assert report.wall_time < SECONDS + 10, table
    assert sum(report.hostile.values()) > 0, table  # the hostile actor was at work
    # Production's write path ran under the faults: requests wrote their own frames.
    assert report.direct_writes > 0, table


@pytest.mark.slow
def test_short_soak_with_idempotency_keys_is_exactly_once() -> None:
    """``trio-relay soak --idempotency on``: the same faults, lost results among them,
    against a connector that honours keys: nothing shown twice, nothing lost, and an
    ambiguous outcome only where a request's own deadline ran out."""
    report = _in_fresh_interpreter(5.0, idempotency=True)
    table = report.render()
    assert report.ok, table
    assert report.idempotency and "idempotency  on" in table
    assert report.resent > 0, table  # ambiguity was met, and sent away again
    assert report.duplicates == 0 and report.lost == 0, table
    assert report.ambiguous_early == 0, table
    assert not [kind for kind in report.outcomes if kind == "ambiguous:connection_lost"], table


@pytest.mark.slow
def test_short_soak_with_the_redis_dedupe_store(redis_server: RedisServer) -> None:
    """``trio-relay soak --dedupe redis://...``: the same promises with "handled once"
    kept in a real redis-server."""
    report = _in_fresh_interpreter(4.0, dedupe=redis_server.url)
    table = report.render()
    assert report.ok, table
    assert report.dedupe == redis_server.url and "dedupe store: redis://" in table
    assert report.deliveries > 20 and report.handled == report.deliveries, table
    # Every delivery handled left its committed key in the server (replays dropped by it
    # depend on the chaos drawn, so they are not counted on).
    # (The server is this test's own: every key in it is the soak's.)
    scan = [*redis_server.cli(), "--scan"]
    keys = subprocess.run(scan, capture_output=True, text=True, check=True).stdout.split()
    assert len(keys) == report.handled, (keys[:5], table)


def test_the_table_names_every_invariant_and_fault() -> None:
    report = SoakReport(seconds=1.0, seed=5)
    report.invariants = [Invariant("a", True, "fine"), Invariant("b", False, "broken")]
    table = report.render()
    assert not report.ok
    assert "seed 5" in table and "FAILED" in table and "broken" in table
    assert all(kind in table for kind in FAULTS)
    assert not SoakReport(seconds=1.0, seed=5).ok  # no verdicts is not a pass


def test_the_hostile_actor_predicts_a_counter_and_forges_what_json_refuses() -> None:
    from trio_relay_benchmarks.soak.hostile import AHEAD, _result_line, predict

    guesses = predict("a1b2c3d400000009")
    assert guesses[:2] == ["a1b2c3d40000000a", "a1b2c3d40000000b"]
    assert len(guesses) == 2 * len(AHEAD) and all(len(g) == 16 for g in guesses)
    assert len(set(guesses[len(AHEAD) :])) == len(AHEAD)  # the random half
    line = _result_line("r1", "nan", ',"v":NaN')
    assert line.endswith("}\n") and '"v":NaN' in line
    frame = json.loads(line)  # Python's parser takes NaN; the relay must not
    assert frame["result"]["forged"] == "nan" and frame["requestId"] == "r1"

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    with pytest.raises(ValueError, match="NaN"):
        json.loads(line, parse_constant=refuse)


def test_the_comparison_has_one_line_per_mode() -> None:
    from trio_relay_benchmarks.soak.report import compare

    off = SoakReport(seconds=1.0, seed=5, requests=100, ambiguous_early=6)
    off.outcomes["ambiguous:connection_lost"] = 6
    off.outcomes["ambiguous:timeout"] = 2
    on = SoakReport(seconds=1.0, seed=5, idempotency=True, requests=90, resent=9)
    on.outcomes["ambiguous:timeout"] = 2
    lines = compare([off, on]).splitlines()
    assert lines[1].split() == [
        "idempotency", "requests", "ambiguous", "at", "deadline", "shown", "twice", "lost",
        "sent", "again",
    ]  # fmt: skip
    assert lines[2].split() == ["off", "100", "8", "2", "0", "0", "0"]
    assert lines[3].split() == ["on", "90", "2", "2", "0", "0", "9"]
