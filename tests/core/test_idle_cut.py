"""The idle-cut rule (issue 23, item 3) as a table: link ends in, warnings, the
effective ping interval and "explained" out."""

from __future__ import annotations

import pytest

from trio_relay._core.idle_cut import IdleCut

CUT = True
CLEAN = False

# (ends fed in order as (cut, silence); the ping interval after them; the learned cut;
# how many warnings; whether the last end was explained)
TABLE = [
    pytest.param([(CUT, 3.0)], 10.0, None, 0, False, id="one cut is no pattern"),
    pytest.param([(CUT, 3.0), (CUT, 3.1)], 1.5, 3.0, 1, True, id="two alike: learned"),
    pytest.param([(CUT, 3.0), (CUT, 3.6)], 10.0, None, 0, False, id="20% apart: not alike"),
    pytest.param([(CUT, 3.4), (CUT, 3.0)], 1.5, 3.0, 1, True, id="the shorter silence counts"),
    pytest.param([(CUT, 3.0), (CLEAN, 3.0), (CUT, 3.0)], 10.0, None, 0, False,
                 id="a clean end between breaks the pair"),
    pytest.param([(CUT, 0.5), (CUT, 0.5)], 10.0, None, 0, False, id="under 1 s: ignored"),
    pytest.param([(CUT, 1.2), (CUT, 1.2)], 1.0, 1.2, 1, True, id="never below 1 s"),
    pytest.param([(CUT, 12.0), (CUT, 12.0)], 10.0, None, 0, False,
                 id="a ping was due: a dead peer, not an idle cut"),
    pytest.param([(CUT, 11.0), (CUT, 11.0)], 5.5, 11.0, 1, True,
                 id="within the tolerance of the ping interval"),
    pytest.param([(CUT, 3.0), (CUT, 3.0), (CUT, 3.05)], 1.5, 3.0, 1, True,
                 id="a cut at the learned silence: explained, no second warning"),
    pytest.param([(CUT, 3.0), (CUT, 3.0), (CUT, 1.5)], 1.5, 3.0, 1, False,
                 id="one shorter cut after learning: not yet a pattern"),
    pytest.param([(CUT, 3.0), (CUT, 3.0), (CUT, 1.6), (CUT, 1.6)], 1.0, 1.6, 2, True,
                 id="a shorter cut, twice: learned again"),
    pytest.param([(CLEAN, 3.0), (CLEAN, 3.0)], 10.0, None, 0, False, id="clean ends: nothing"),
]


@pytest.mark.parametrize(("ends", "interval", "cut_after", "warnings", "explained"), TABLE)
def test_the_rule(
    ends: list[tuple[bool, float]],
    interval: float,
    cut_after: float | None,
    warnings: int,
    explained: bool,
) -> None:
    rule = IdleCut(10.0)
    said = []
    step = None
    for cut, silence in ends:
        step = rule.link_ended(cut=cut, silence=silence)
        if step.warning is not None:
            said.append(step.warning)
    assert step is not None
    assert rule.ping_interval == interval
    assert rule.cut_after == cut_after
    assert len(said) == warnings, said
    assert step.explained is explained


def test_the_warning_names_the_silence_and_the_remedy() -> None:
    rule = IdleCut(10.0)
    rule.link_ended(cut=True, silence=3.02)
    warning = rule.link_ended(cut=True, silence=2.98).warning
    assert warning == (
        "something between us and the connector cuts connections idle for ~3.0 s; "
        "pinging every 1.5 s from now on; set ping_interval below it"
    )


def test_already_pinging_often_enough_learns_nothing() -> None:
    # Pings every 1 s and cuts after 1.1 s: halving would not go lower than 1 s.
    rule = IdleCut(1.0)
    for _ in range(3):
        step = rule.link_ended(cut=True, silence=1.1)
        assert step.warning is None and not step.explained
    assert rule.ping_interval == 1.0 and rule.cut_after is None


def test_without_adapting_it_warns_once_and_keeps_the_interval() -> None:
    rule = IdleCut(10.0, adapt=False)
    steps = [rule.link_ended(cut=True, silence=3.0) for _ in range(4)]
    warnings = [step.warning for step in steps if step.warning is not None]
    assert warnings == [
        "something between us and the connector cuts connections idle for ~3.0 s; "
        "pinging stays every 10 s (adapt_ping_interval is off); set ping_interval below it"
    ]
    assert rule.ping_interval == 10.0 and rule.cut_after == 3.0
    assert not any(step.explained for step in steps)  # the ladder climbs as configured
