"""The benchmarks (benchmarks/, imported as trio_relay_benchmarks) can never rot.

Every benchmark runs here for real in ``--quick`` mode, the same mode a user runs
(a few samples through the same code as a full run, connector process included), and
must produce a complete table and valid JSON. Timings are not asserted: a loaded CI machine
must not fail the suite. The report helpers and a baseline fix get unit tests.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from trio_relay_benchmarks import detect
from trio_relay_benchmarks._context import Context
from trio_relay_benchmarks._control import ConnectorProcess
from trio_relay_benchmarks._report import (
    Progress,
    Result,
    Row,
    Target,
    percentile,
    render,
    targets_markdown,
    thin,
)
from trio_relay_benchmarks.baseline import BaselineConfig, BaselineRelay
from trio_relay_benchmarks.inflight import floor_verdict, spread_verdict
from trio_relay_benchmarks.redial import redial_floor_verdict
from trio_relay_benchmarks.run import ALL, run_benchmarks

from trio_relay.testing import netns

REQUIRE_NETNS_ENV = "TRIO_RELAY_REQUIRE_NETNS"


WIDTH = 100
"""What every line a benchmark prints fits in."""


@pytest.mark.parametrize("name", ALL)
def test_every_benchmark_runs(name: str, tmp_path: Path) -> None:
    out = io.StringIO()
    json_path = tmp_path / f"{name}.json"
    [result] = run_benchmarks([name], mode="quick", json_path=str(json_path), pin=False, out=out)

    assert result.name == name
    assert result.rows or result.tables, "a benchmark must report figures"
    for row in result.rows:
        # Every figure was measured for both implementations (or explained in words).
        assert row.trio is not None or row.text_trio is not None, row
        assert row.base is not None or row.text_base is not None, row
    for table in result.tables:
        for cells in table.rows:
            assert len(cells) == len(table.columns) and "-" not in cells, cells
    text = out.getvalue()
    assert f"{name}:" in text or result.tables, text
    assert "trio_relay" in text and "machine:" in text
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    # Targets are the developers' (--check); a plain run gives no verdicts.
    assert "MISSED" not in text and "target MET" not in text

    document = json.loads(json_path.read_text())
    assert document["machine"]["python"] and document["machine"]["cpu_count"]
    assert document["machine"]["versions"]["trio"]
    assert document["run"]["mode"] == "quick"
    assert document["benchmarks"][name]["rows"] or document["benchmarks"][name]["tables"]
    assert document["benchmarks"][name]["configs"]

    if name == "inflight":
        # The one property a benchmark checks rather than measures: every outcome of a
        # request whose frame was written before the reset is ambiguous, for both.
        [ambiguous] = [t for t in result.targets if "ambiguous" in t.text]
        assert ambiguous.met
        for row in result.rows:
            if "ambiguous" in row.label:
                assert row.text_trio == row.text_base, row
        # The spread targets say how much the machine's own speed varied meanwhile.
        spreads = [t for t in result.targets if "spread of the rounds" in t.text]
        assert len(spreads) == 2
        assert all("the machine itself (a fixed Python loop)" in t.measured for t in spreads)

    if name == "compare":
        # The summary first: trio_relay beside the three other clients, in at most a
        # dozen rows, redial and CPU per request at 1, 16 and 256 in flight.
        summary = result.tables[0]
        assert summary.columns[1:] == ["trio_relay", "asyncio design", "websockets.trio",
                                       "wsproto"]  # fmt: skip
        assert len(summary.rows) <= 12
        labels = [cells[0] for cells in summary.rows]
        assert any("redial p50, own policy" in label for label in labels)
        assert any("redial p50, zero backoff" in label for label in labels)
        for k in (1, 16, 256):
            assert any(f"CPU/request, {k} in flight" in label for label in labels), labels
        assert text.index(summary.title) < text.index("Details")
        assert "What it means:" in text

    if name == "redial":
        # Every zero-backoff drop (the first session of all is a default-policy one) is
        # classed as following its own client's session or another client's, and both
        # classes are seen for both clients: the policy blocks interleave the clients.
        [drops] = [r for r in result.rows if r.label == "zero backoff: p50"]
        after = [r for r in result.rows if "sessions that ran right after" in r.label]
        assert len(after) == 2
        assert sum(r.n_trio or 0 for r in after) == drops.n_trio
        assert sum(r.n_base or 0 for r in after) == drops.n_base
        assert all(r.n_trio and r.n_base for r in after), after
        # The Trio floor client redialled in the same zero-backoff rounds, as many times,
        # and both zero-backoff targets name its ratio to the baseline's.
        [floor] = [
            r for r in result.rows if r.label == "zero backoff: p50 vs the Trio floor client"
        ]
        assert floor.n_base == drops.n_trio and floor.base is not None and floor.base > 0
        zero = [t for t in result.targets if "zero backoff on both" in t.text]
        assert len(zero) == 2
        assert all("the Trio floor client" in t.measured for t in zero), zero


def test_command_line_bench(tmp_path: Path) -> None:
    """``trio-relay bench NAME`` end to end, in a fresh process (CPU pinning included)."""
    json_path = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "trio_relay.cli", "bench", "inbound", "--tiny", "--pin",
         "--json", str(json_path), "--no-plot"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "inbound:" in done.stdout
    # Piped: a plain line as each phase starts, no bar redrawn in place.
    assert "\r" not in done.stdout + done.stderr
    assert re.search(r"^\[\d+:\d\d\] inbound \(\d+ steps\)$", done.stdout, re.M), done.stdout
    assert json.loads(json_path.read_text())["benchmarks"]["inbound"]
    assert not (tmp_path / "bench-plots").exists()


def test_default_bench_writes_its_plots_where_it_says(tmp_path: Path) -> None:
    """The default run, as a user starts it, writes the redial CDF and the CPU per
    request plot by default, into a directory it names at the end."""
    done = subprocess.run(
        [sys.executable, "-m", "trio_relay.cli", "bench", "--tiny"],
        capture_output=True, text=True, timeout=180, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("plots: "), last
    written = sorted(p.name for p in (tmp_path / "bench-plots").iterdir())
    assert written == ["compare-cdf.svg", "cpu-per-request.svg"]
    for name in written:
        assert f"bench-plots/{name}" in last
        svg = (tmp_path / "bench-plots" / name).read_text()
        assert "<svg" in svg and "trio_relay" in svg


def test_check_exits_non_zero_exactly_when_a_target_is_missed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_relay.cli", "bench", "memory", "--tiny", "--check",
         "--no-plot"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    verdicts = [line for line in done.stdout.splitlines() if line.startswith("target ")]
    assert verdicts, done.stdout
    missed = sum(line.startswith("target MISSED") for line in verdicts)
    assert f"check: {len(verdicts) - missed} of {len(verdicts)} targets met" in done.stdout
    assert done.returncode == (1 if missed else 0), done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is not None, reason="matplotlib is installed"
)
def test_plot_without_matplotlib_fails_early_and_clearly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_relay.cli", "bench", "redial", "--tiny",
         "--plot", str(tmp_path / "plots")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "matplotlib" in done.stderr and "[bench]" in done.stderr
    assert "--no-plot" in done.stderr
    assert "redial:" not in done.stdout, "it must fail before running anything"


def test_unknown_benchmark_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown benchmark"):
        run_benchmarks(["nope"], out=io.StringIO())


# --- the kernel path (root and network namespaces) -------------------------------------


@pytest.mark.netns
@pytest.mark.slow
def test_kernel_path_detects_a_vanished_peer() -> None:
    reason = netns.unavailable(probe=True)
    if reason is not None:
        if os.environ.get(REQUIRE_NETNS_ENV) == "1":
            pytest.fail(f"network namespaces required but unavailable: {reason}")
        pytest.skip(f"network namespaces unavailable: {reason}")
    ctx = Context(mode="tiny")
    kernel = detect.run_kernel(ctx, 1, random.Random(1), backends=(detect.TRIO_RELAY,))
    # Pings (1 s / 2 s) and TCP keepalive (idle 1 s + 2 probes 1 s apart) each notice
    # the dead link in a few seconds.
    for case in ("scaled pings", "keepalive only"):
        [seconds] = kernel[case]["trio_relay"]
        assert seconds is not None and 0.5 < seconds < 6, (case, seconds)


# --- report helpers --------------------------------------------------------------------


def test_percentile_interpolates_between_ranks() -> None:
    samples = [float(v) for v in range(1, 11)]
    assert percentile(samples, 0) == 1
    assert percentile(samples, 100) == 10
    assert percentile(samples, 50) == 5.5
    assert math.isnan(percentile([], 50))


def test_thin_keeps_the_shape_of_the_cdf() -> None:
    samples = [float(v) for v in range(10_000, 0, -1)]
    kept = thin(samples, keep=101)
    assert len(kept) == 101
    assert kept[0] == 1 and kept[-1] == 10_000 and kept == sorted(kept)
    assert abs(kept[50] - percentile(samples, 50)) <= 1  # a near order statistic
    assert thin([3.0, 1.0], keep=10) == [1.0, 3.0]


def test_render_shows_ratios_notes_and_targets_only_when_checking() -> None:
    result = Result("x", "a title")
    result.rows = [
        Row("latency", "ms", 2.0, 8.0, 10, 5),
        Row("rate", "req/s", 3000.0, 1000.0, 3, 3, better="higher"),
        Row("missing", "s", None, 1.0, 0, 1, text_trio="not seen"),
    ]
    result.notes = ["a note " + "long " * 40]
    result.targets = [Target("fast", "2 ms", True), Target("faster", "2 ms", False, "by 1 ms")]
    text = render(result)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    [latency] = [line for line in lines if line.startswith("latency")]
    assert "10/5" in latency and "2.00 ms" in latency and latency.rstrip().endswith("0.25x")
    [rate] = [line for line in lines if line.startswith("rate")]
    assert "(higher is better)" in rate and "3,000 req/s" in rate and "3.00x" in rate
    assert "not seen" in text
    assert "note: a note" in text
    assert "MET" not in text and "MISSED" not in text
    checked = render(result, check=True)
    assert "target MET    fast: 2 ms" in checked
    assert "target MISSED faster: 2 ms (by 1 ms)" in checked


def test_progress_draws_only_when_enabled() -> None:
    quiet, loud = io.StringIO(), io.StringIO()
    for stream, enabled in ((quiet, False), (loud, True)):
        progress = Progress(stream, enabled=enabled)
        progress.start("redial", 4)
        for _ in range(4):
            progress.advance()
        progress.start("throughput", 2)
        progress.close()
    assert quiet.getvalue() == ""
    # Not a terminal: one plain line as each phase starts, nothing redrawn in place.
    lines = loud.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["redial (4 steps)",
                                                          "throughput (2 steps)"]  # fmt: skip
    assert "\r" not in loud.getvalue()


def test_progress_bar_only_on_a_terminal() -> None:
    assert not Progress(io.StringIO()).live


# --- the baseline ----------------------------------------------------------------------


def test_baseline_failed_dials_do_not_reset_its_ladder() -> None:
    """With backoff_reset_after=0 (as the redial benchmark sets it) a failed dial must
    still climb the ladder: only a connection that lived resets it. Before the fix a
    failed dial counted as a connection that lived 0 s, so the baseline redialled a
    down connector every 0.5-1 s forever."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []

    class Recorder(random.Random):
        def uniform(self, a: float, b: float) -> float:
            waits.append(b)
            return 0.0

    async def main() -> None:
        config = BaselineConfig(backoff_initial=1.0, backoff_max=4.0, backoff_reset_after=0)
        async with BaselineRelay(f"http://127.0.0.1:{port}", config, rng=Recorder()) as relay:
            while relay.stats["dials"] < 5:
                await asyncio.sleep(0.005)

    asyncio.run(asyncio.wait_for(main(), 10))
    assert waits[:4] == [1.0, 2.0, 4.0, 4.0]


# --- the fast connector ----------------------------------------------------------------


def test_fast_connector_batches_its_replies() -> None:
    """Every ``outbound`` read at once is answered in one message, each with its own
    ``requestId``; a ``hello`` gets its descriptor."""
    from websockets.sync.client import connect

    with ConnectorProcess(module="trio_relay_benchmarks.fast_connector") as proc:
        assert proc.loop in ("uvloop", "asyncio")
        with connect(proc.url.replace("http://", "ws://") + "/", open_timeout=10) as ws:
            ws.send('{"type":"hello","platform":"slack","botId":"B1"}\n')
            descriptor = json.loads(str(ws.recv(timeout=10)))
            assert descriptor["type"] == "descriptor"
            assert descriptor["descriptor"]["platform"] == "slack"
            lines = [
                json.dumps({"type": "outbound", "requestId": f"r{i}", "action": {"op": "x"}})
                for i in range(3)
            ]
            ws.send("\n".join(lines) + "\n")
            reply = str(ws.recv(timeout=10))
        frames = [json.loads(line) for line in reply.splitlines()]
        assert [f["requestId"] for f in frames] == ["r0", "r1", "r2"]
        assert all(f == {"type": "outbound_result", "requestId": f["requestId"],
                         "result": {"success": True}} for f in frames)  # fmt: skip


def test_targets_markdown_puts_each_figure_beside_its_target() -> None:
    result = Result("x", "a title")
    result.targets = [Target("fast", "2 ms", True), Target("faster", "2 ms", False, "by 1 ms")]
    info = {"date": "d", "cpu_count": 2, "cpu_model": "m", "python": "CPython 3.11"}
    text = targets_markdown([result], info, "quick")
    assert "| x | fast | 2 ms | met |" in text
    assert "| x | faster | 2 ms | **missed** by 1 ms |" in text
    assert "mode `quick`" in text


def test_inflight_floor_verdict_says_how_much_of_a_miss_is_the_floor() -> None:
    # Met, or the floor client itself within the target: nothing to explain.
    assert floor_verdict(1.05, 1.4, 0.75) == ""
    assert floor_verdict(1.5, 1.05, 1.43) == ""
    # The floor client over the target and trio_relay within the target of it.
    below = floor_verdict(1.46, 1.37, 1.06)
    assert below.startswith("below a floor:") and "1.37x the bare floor" in below
    # The floor client over the target, trio_relay further still.
    partly = floor_verdict(1.90, 1.22, 1.55)
    assert partly.startswith("partly a floor:") and "trio_relay 1.55x that client" in partly


def test_redial_floor_verdict_says_how_much_of_a_miss_is_the_floor() -> None:
    # The floor client itself within the target: a miss is trio_relay's own.
    assert redial_floor_verdict(0.95, 1.30) == ""
    # The floor client over the target and trio_relay within the target of it.
    below = redial_floor_verdict(1.12, 0.97)
    assert below.startswith("below a floor:") and "1.12x the baseline's" in below
    # The floor client over the target, trio_relay further still.
    partly = redial_floor_verdict(1.05, 1.15)
    assert partly.startswith("partly a floor:") and "trio_relay 1.15x that client" in partly


def test_inflight_spread_verdict_names_the_floors_that_varied_as_much() -> None:
    # Met: nothing to explain.
    assert spread_verdict(1.49, 2.0, 2.0) == ""
    # Missed with both floors steady: a plain miss of ours.
    assert spread_verdict(1.8, 1.2, 1.1) == ""
    # Missed where the machine alone, or Trio's floor, varied as much.
    both = spread_verdict(1.8, 1.9, 2.03)
    assert both == (
        "below a floor: the machine's own speed varied 2.03x and Trio's bare floor varied "
        "1.90x over the same rounds"
    )
    machine_only = spread_verdict(1.8, 1.2, 1.6)
    assert machine_only.endswith("the machine's own speed varied 1.60x over the same rounds")
    assert spread_verdict(1.8, 1.7, 1.2) == (
        "below a floor: Trio's bare floor varied 1.70x over the same rounds"
    )
