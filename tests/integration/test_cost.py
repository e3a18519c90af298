"""trio_relay's cost per request and per redial may not grow unnoticed.

Counts, not time: the instructions trio_relay's client process executes on a fixed
workload under valgrind's callgrind (``benchmarks/cost_workload.py``, against the
lockstep connector, so every run exchanges the same messages), per request at 1, 16
and 256 in flight and per redial. The test fails when one grows more than 5 % above
the committed reference, ``benchmarks/cost_reference.json``; a change that moves them
on purpose updates the reference (``trio-relay bench cost --update-reference``) and
says why in its commit message.

Why 5 % is safe from noise: on this workload the counts per request repeat to within
0.05 % run to run and the count per redial to within 1.7 % (the reference records its
own spread over three runs; the redial's dial and reconnect take a varying number of
loop turns), so only a change of the code or of a library on the measured path moves
one by 5 %.
About 35 s of callgrind. Where valgrind is not installed the test skips with that
reason, unless ``TRIO_RELAY_REQUIRE_VALGRIND=1`` (``.ci/run``), where it fails.
"""

from __future__ import annotations

import os

import pytest
from trio_relay_benchmarks import cost
from trio_relay_benchmarks._context import Context

REQUIRE_VALGRIND_ENV = "TRIO_RELAY_REQUIRE_VALGRIND"


@pytest.mark.slow
def test_cost_per_request_and_per_redial_within_5_percent_of_the_reference() -> None:
    reason = cost.valgrind_unavailable()
    if reason is not None:
        if os.environ.get(REQUIRE_VALGRIND_ENV) == "1":
            pytest.fail(f"valgrind is required ({REQUIRE_VALGRIND_ENV}=1) but {reason}")
        pytest.skip(f"the cost test counts instructions under callgrind: {reason}")
    reference = cost.read_reference()
    assert reference["plan"] == cost.PLANS[cost.REFERENCE_PLAN], (
        "the reference was counted on another plan: trio-relay bench cost --update-reference"
    )
    with Context().connector(fast=True) as proc:
        measured = cost.count_reference(proc.url)
    grown = {}
    for figure in cost.FIGURES:
        ratio = measured[figure] / reference["instructions"][figure]
        if ratio > 1 + cost.REGRESSION:
            grown[figure] = f"{measured[figure]:,.0f} = {ratio:.3f}x the reference"
    assert not grown, (
        f"instructions grew more than {cost.REGRESSION:.0%} over "
        f"benchmarks/cost_reference.json: {grown}; if that is on purpose, run "
        "trio-relay bench cost --update-reference and say why in the commit message"
    )
