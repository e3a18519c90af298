"""Backoff: first delay, the jittered doubling ladder, flapping and reset rules."""

from __future__ import annotations

import random
from typing import Any

import pytest

from trio_relay._core.backoff import Backoff


class RecordingRng(random.Random):
    """Records the bounds of each uniform() call and answers the upper bound."""

    def __init__(self) -> None:
        super().__init__(0)
        self.bounds: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.bounds.append((a, b))
        return b


def test_defaults_follow_the_reference_timings() -> None:
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    delays = [backoff.next_delay() for _ in range(9)]
    assert delays[0] == 0.0  # first redial after a healthy connection goes out at once
    assert rng.bounds == [
        (0.5, 1.0),
        (1.0, 2.0),
        (2.0, 4.0),
        (4.0, 8.0),
        (8.0, 16.0),
        (15.0, 30.0),
        (15.0, 30.0),
        (15.0, 30.0),
    ]
    assert delays[1:] == [b for _, b in rng.bounds]


def test_first_delay_does_not_use_the_rng() -> None:
    rng = RecordingRng()
    backoff = Backoff(first_delay=1.0, rng=rng)
    assert backoff.next_delay() == 1.0  # the dormant-close redial waits exactly 1 s
    assert rng.bounds == []


def test_custom_ladder_caps_at_maximum() -> None:
    rng = RecordingRng()
    backoff = Backoff(initial=0.25, maximum=1.5, rng=rng)
    for _ in range(6):
        backoff.next_delay()
    assert rng.bounds == [(0.125, 0.25), (0.25, 0.5), (0.5, 1.0), (0.75, 1.5), (0.75, 1.5)]


def test_attempts_counts_rungs() -> None:
    backoff = Backoff(rng=RecordingRng())
    assert backoff.attempts == 0
    backoff.next_delay()
    backoff.next_delay()
    assert backoff.attempts == 2


def test_ladder_kept_across_short_connections() -> None:
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    for _ in range(3):
        backoff.next_delay()
    # A connection that accepted us and then dropped within reset_after (flapping).
    backoff.connection_ended(lived=59.9)
    backoff.next_delay()
    assert rng.bounds[-1] == (2.0, 4.0)  # the next rung, not back to the start
    backoff.connection_ended(lived=0.0)
    backoff.next_delay()
    assert rng.bounds[-1] == (4.0, 8.0)


@pytest.mark.parametrize("lived", [60.0, 61.0, 3600.0])
def test_ladder_reset_after_a_long_connection(lived: float) -> None:
    rng = RecordingRng()
    backoff = Backoff(first_delay=0.0, rng=rng)
    for _ in range(5):
        backoff.next_delay()
    backoff.connection_ended(lived=lived)
    assert backoff.attempts == 0
    calls = len(rng.bounds)
    assert backoff.next_delay() == 0.0
    assert len(rng.bounds) == calls
    backoff.next_delay()
    assert rng.bounds[-1] == (0.5, 1.0)


def test_custom_reset_after() -> None:
    backoff = Backoff(reset_after=5.0, rng=RecordingRng())
    backoff.next_delay()
    backoff.next_delay()
    backoff.connection_ended(lived=4.99)
    assert backoff.attempts == 2
    backoff.connection_ended(lived=5.0)
    assert backoff.attempts == 0


def test_explicit_reset() -> None:
    backoff = Backoff(first_delay=1.0, rng=RecordingRng())
    for _ in range(4):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_real_rng_stays_within_bounds() -> None:
    backoff = Backoff(rng=random.Random(1))
    assert backoff.next_delay() == 0.0
    for attempt in range(1, 40):
        ceiling = min(30.0, 2.0 ** (attempt - 1))
        assert ceiling / 2 <= backoff.next_delay() <= ceiling


def test_injectable_rng_gives_reproducible_sequences() -> None:
    def run(seed: int) -> list[float]:
        backoff = Backoff(rng=random.Random(seed))
        return [backoff.next_delay() for _ in range(20)]

    assert run(42) == run(42)
    assert run(42) != run(43)


def test_default_rng_is_jittered() -> None:
    # Without jitter a herd of gateways would redial a restarted connector in lockstep.
    samples = set()
    for _ in range(20):
        backoff = Backoff()
        backoff.next_delay()
        backoff.next_delay()
        samples.add(backoff.next_delay())
    assert len(samples) > 1


def test_a_very_long_outage_never_overflows() -> None:
    # 2.0 ** 1024 raises OverflowError: after ~8.5 h of 30 s waits the ladder crashed.
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    for _ in range(5000):
        backoff.next_delay()
    assert rng.bounds[-1] == (15.0, 30.0)


def test_zero_initial_means_no_wait() -> None:
    backoff = Backoff(initial=0.0, maximum=0.0, rng=RecordingRng())
    assert [backoff.next_delay() for _ in range(5)] == [0.0] * 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": -1.0},
        {"initial": 5.0, "maximum": 4.0},
        {"maximum": -1.0},
        {"first_delay": -0.1},
        {"reset_after": -1.0},
    ],
)
def test_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


def test_equal_initial_and_maximum_is_valid() -> None:
    rng = RecordingRng()
    backoff = Backoff(initial=2.0, maximum=2.0, rng=rng)
    backoff.next_delay()
    backoff.next_delay()
    backoff.next_delay()
    assert rng.bounds == [(1.0, 2.0), (1.0, 2.0)]
