"""Backoff: the immediate redial after a healthy link, the quick retries, the jittered
doubling ladder, Retry-After, and the rules that reset or keep the ladder.

Randomness is injected: :class:`RecordingRng` records the bounds of each draw and answers
the upper bound, so every delay below is exact.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from trio_relay._core.backoff import QUICK_RETRIES, Backoff

LADDER = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, 16.0), (15.0, 30.0)]
"""The bounds of the contract's ladder (1 -> 30 s doubling, uniform in [d/2, d])."""
QUICK = [(d / 2, d) for d in QUICK_RETRIES]


class RecordingRng(random.Random):
    """Records the bounds of each uniform() call and answers the upper bound."""

    def __init__(self) -> None:
        super().__init__(0)
        self.bounds: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.bounds.append((a, b))
        return b


def healthy(rng: random.Random | None = None, **kwargs: Any) -> Backoff:
    backoff = Backoff(rng=rng or RecordingRng(), **kwargs)
    backoff.healthy_link_ended()
    return backoff


def test_quick_retries_are_the_issue_s_schedule() -> None:
    assert QUICK_RETRIES == (0.05, 0.1, 0.2, 0.4)


def test_a_new_relay_climbs_the_ladder_from_its_first_rung() -> None:
    """No healthy link behind it: no immediate redial, no quick retries."""
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    delays = [backoff.next_delay(refused_dial=True) for _ in range(8)]
    assert rng.bounds == [*LADDER, (15.0, 30.0), (15.0, 30.0)]
    assert delays == [b for _, b in rng.bounds]


def test_after_a_healthy_link_refused_dials_retry_quickly_then_join_the_ladder() -> None:
    rng = RecordingRng()
    backoff = healthy(rng)
    delays = [backoff.next_delay(refused_dial=True) for _ in range(1 + len(QUICK) + 3)]
    assert delays[0] == 0.0  # the first redial: at once, no draw
    assert rng.bounds == [*QUICK, *LADDER[:3]]
    assert delays[1:] == [0.05, 0.1, 0.2, 0.4, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        (1.0, 30.0, [0.05, 0.1, 0.2, 0.4]),  # the defaults: the issue's schedule
        (0.02, 0.25, [0.02, 0.04, 0.08, 0.16]),  # a faster ladder (the soak's) wins
        (0.1, 0.15, [0.05, 0.1, 0.15, 0.15]),  # capped by backoff_max
        (0.0, 0.0, [0.0, 0.0, 0.0, 0.0]),  # zero backoff stays zero
    ],
)
def test_quick_retries_are_never_slower_than_the_ladder(
    initial: float, maximum: float, expected: list[float]
) -> None:
    backoff = healthy(initial=initial, maximum=maximum)
    assert backoff.next_delay() == 0.0
    assert [backoff.next_delay(refused_dial=True) for _ in expected] == expected


def test_a_young_death_after_a_healthy_link_goes_to_the_ladder_not_the_quick_retries() -> None:
    """Flapping (connected, then dropped young) is not a refused dial: it climbs."""
    rng = RecordingRng()
    backoff = healthy(rng)
    assert backoff.next_delay() == 0.0
    assert backoff.next_delay(refused_dial=False) == 1.0
    # And the quick retries are spent until the next healthy link.
    assert backoff.next_delay(refused_dial=True) == 2.0
    assert rng.bounds == LADDER[:2]


@pytest.mark.parametrize(
    ("up_for", "is_healthy"),
    [(None, False), (0.0, False), (4.999, False), (5.0, True), (3600.0, True)],
)
def test_healthy_means_handshake_done_and_served_stable_after(
    up_for: float | None, is_healthy: bool
) -> None:
    assert Backoff().is_healthy(up_for) is is_healthy


def test_custom_stable_after() -> None:
    backoff = Backoff(stable_after=0.0)
    assert backoff.is_healthy(0.0)
    assert not backoff.is_healthy(None)  # never completed a handshake


def test_healthy_link_resets_a_climbed_ladder() -> None:
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    for _ in range(5):
        backoff.next_delay()
    assert backoff.rung == 5
    backoff.healthy_link_ended()
    assert backoff.rung == 0
    assert backoff.next_delay() == 0.0
    assert backoff.next_delay() == 1.0


def test_first_delay_is_used_for_the_first_redial_and_draws_nothing() -> None:
    rng = RecordingRng()
    backoff = healthy(rng, first_delay=1.5)
    assert backoff.next_delay() == 1.5
    assert rng.bounds == []


def test_first_redial_taken_skips_the_first_delay_but_arms_the_quick_retries() -> None:
    """The dormant redial times its own first redial."""
    rng = RecordingRng()
    backoff = Backoff(rng=rng)
    backoff.healthy_link_ended(first_redial_taken=True)
    assert backoff.next_delay(refused_dial=True) == 0.05


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        (None, 1.0),  # no header: the ladder's delay
        (0.2, 1.0),  # shorter than the ladder: the ladder wins
        (7.0, 7.0),  # longer: honoured
        (3600.0, 30.0),  # capped at backoff_max
    ],
)
def test_retry_after_is_honoured_up_to_the_maximum(
    retry_after: float | None, expected: float
) -> None:
    backoff = Backoff(rng=RecordingRng())
    assert backoff.next_delay(retry_after=retry_after) == expected


def test_retry_after_skips_the_quick_retries() -> None:
    """A server that asks for patience does not get four dials in a second."""
    rng = RecordingRng()
    backoff = healthy(rng)
    assert backoff.next_delay() == 0.0
    assert backoff.next_delay(refused_dial=True, retry_after=3.0) == 3.0
    assert rng.bounds == [(0.5, 1.0)]


def test_custom_ladder_caps_at_maximum() -> None:
    rng = RecordingRng()
    backoff = Backoff(initial=0.25, maximum=1.5, rng=rng)
    for _ in range(5):
        backoff.next_delay()
    assert rng.bounds == [(0.125, 0.25), (0.25, 0.5), (0.5, 1.0), (0.75, 1.5), (0.75, 1.5)]


def test_real_rng_stays_within_bounds() -> None:
    backoff = Backoff(rng=random.Random(1))
    for rung in range(40):
        ceiling = min(30.0, 2.0**rung)
        assert ceiling / 2 <= backoff.next_delay() <= ceiling


def test_injectable_rng_gives_reproducible_sequences() -> None:
    def run(seed: int) -> list[float]:
        backoff = healthy(random.Random(seed))
        return [backoff.next_delay(refused_dial=True) for _ in range(20)]

    assert run(42) == run(42)
    assert run(42) != run(43)


def test_default_rng_is_jittered() -> None:
    # Without jitter a herd of gateways would redial a restarted connector in lockstep.
    samples = {Backoff().next_delay() for _ in range(20)}
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
        {"stable_after": -1.0},
        {"stable_after": float("inf")},
        {"quick_retries": (0.05, -0.1)},
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
    assert rng.bounds == [(1.0, 2.0), (1.0, 2.0)]
