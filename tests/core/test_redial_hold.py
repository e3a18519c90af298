"""The redial hold as tables (docs/protocol.md, "Redial hold"): how long a hold lasts
(its time or the cap, a new one replacing the old), and when the wait before a dial
ends once a hold has been on during it. Times are passed in: no clock, no Trio."""

from __future__ import annotations

import math

import pytest

from trio_relay._core.backoff import Backoff
from trio_relay._core.lifecycle import (
    DEFAULT_REDIAL_HOLD_MAX,
    Lifecycle,
    RedialHold,
    RedialWait,
)

CAP = 60.0


@pytest.mark.parametrize(
    ("seconds", "lasts"),
    [
        (0.5, 0.5),
        (10, 10.0),
        (CAP, CAP),
        (CAP + 0.001, CAP),
        (3600.0, CAP),
        (math.inf, CAP),
    ],
)
def test_a_hold_lasts_its_time_or_the_cap(seconds: float, lasts: float) -> None:
    hold = RedialHold(CAP)
    assert hold.hold(seconds, now=100.0) == lasts
    assert hold.until == 100.0 + lasts
    assert hold.active(100.0)
    assert hold.active(100.0 + lasts - 1e-6)
    assert not hold.active(100.0 + lasts)


@pytest.mark.parametrize("seconds", [0, 0.0, -1, -math.inf, math.nan, True, "5", None])
def test_a_hold_that_is_no_positive_number_is_refused(seconds: object) -> None:
    hold = RedialHold(CAP)
    with pytest.raises(ValueError, match="positive number of seconds"):
        hold.hold(seconds, now=0.0)  # type: ignore[arg-type]
    assert hold.until is None


@pytest.mark.parametrize(
    ("first", "second_at", "second", "until"),
    [
        (10.0, 5.0, 10.0, 15.0),  # a renewal extends from now
        (30.0, 5.0, 2.0, 7.0),  # and can shorten
        (50.0, 40.0, 100.0, 100.0),  # the cap counts from the renewal
    ],
)
def test_a_new_hold_replaces_the_old(
    first: float, second_at: float, second: float, until: float
) -> None:
    hold = RedialHold(CAP)
    hold.hold(first, now=0.0)
    hold.hold(second, now=second_at)
    assert hold.until == until


def test_release_ends_the_hold_and_says_whether_there_was_one() -> None:
    hold = RedialHold(CAP)
    assert hold.release() is False
    hold.hold(10, now=0.0)
    assert hold.release() is True
    assert not hold.active(1.0)
    assert hold.release() is False


# A wait before a dial, looked at step by step: (time, what happens, then next_wake).
# "hold N": hold_redial(N) at that time; "release": release_redial(); "look": just look.
# The backoff chose to dial at 30.
DIAL_AT = 30.0
WAITS: list[tuple[str, list[tuple[float, str, float | None]]]] = [
    ("no hold: the backoff's time", [(0.0, "look", 30.0), (30.0, "look", None)]),
    ("no wait at all", [(30.0, "look", None)]),
    (
        "a hold ends by its time: dial then, not at the backoff's",
        [(0.0, "look", 30.0), (5.0, "hold 10", 15.0), (15.0, "look", None)],
    ),
    (
        "a hold longer than the backoff wait: dial at its end",
        [(0.0, "look", 30.0), (20.0, "hold 40", 60.0), (30.0, "look", 60.0), (60.0, "look", None)],
    ),
    (
        "a release dials at once",
        [(0.0, "look", 30.0), (5.0, "hold 20", 25.0), (8.0, "release", None)],
    ),
    (
        "a capped hold ends at the cap",
        [(0.0, "look", 30.0), (1.0, "hold 1000", 61.0), (61.0, "look", None)],
    ),
    (
        "a renewal moves the end",
        [(0.0, "look", 30.0), (1.0, "hold 5", 6.0), (4.0, "hold 5", 9.0), (9.0, "look", None)],
    ),
    (
        "a hold placed before the wait (while connected) holds it",
        [(-10.0, "hold 20", None), (0.0, "look", 10.0), (10.0, "look", None)],
    ),
    (
        "a hold over before the wait began changes nothing",
        [(-10.0, "hold 5", None), (0.0, "look", 30.0), (30.0, "look", None)],
    ),
]


@pytest.mark.parametrize("steps", [steps for _, steps in WAITS], ids=[name for name, _ in WAITS])
def test_when_the_wait_before_a_dial_ends(steps: list[tuple[float, str, float | None]]) -> None:
    hold = RedialHold(CAP)
    wait: RedialWait | None = None
    for now, what, expected in steps:
        if what.startswith("hold "):
            hold.hold(float(what.split()[1]), now)
        elif what == "release":
            hold.release()
        if now < 0:  # before the wait exists (the link is still up)
            continue
        if wait is None:
            wait = RedialWait(DIAL_AT)
        assert wait.next_wake(now, hold) == expected, (now, what)


def test_the_lifecycle_holds_with_its_cap() -> None:
    assert Lifecycle(Backoff(), dormant_redial_delay=1.0).hold.cap == DEFAULT_REDIAL_HOLD_MAX
    assert DEFAULT_REDIAL_HOLD_MAX == 60.0
    life = Lifecycle(Backoff(), dormant_redial_delay=1.0, redial_hold_max=5.0)
    assert life.hold.hold(30, now=0.0) == 5.0
