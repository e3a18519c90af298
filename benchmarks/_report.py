"""What a benchmark returns, and how it is shown: tables, progress, JSON, plots."""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import io
import json
import math
import os
import platform
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, TextIO

import rich.progress as bars
from rich import box
from rich.console import Console
from rich.table import Table as RichTable

__all__ = [
    "Plot",
    "Progress",
    "Result",
    "Row",
    "Table",
    "Target",
    "floor_share",
    "machine_info",
    "percentile",
    "render",
    "targets_markdown",
    "thin",
    "write_json",
    "write_plots",
]


def percentile(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def thin(samples: list[float], keep: int = 1000) -> list[float]:
    """At most ``keep`` evenly spaced order statistics of ``samples`` (sorted): the same
    CDF, a fraction of the JSON."""
    ordered = sorted(samples)
    if len(ordered) <= keep:
        return ordered
    step = (len(ordered) - 1) / (keep - 1)
    return [ordered[round(i * step)] for i in range(keep)]


def median(samples: list[float]) -> float:
    return percentile(samples, 50)


def floor_share(limit: float, floor_ratio: float, to_floor: float, floor: str, of: str) -> str:
    """How much of a missed "at most ``limit`` times ``of``" target is a floor, from the
    floor client's ratio to the same yardstick and trio_relay's ratio to that client
    (same rounds): below a floor when the least a Trio client can do is over the target
    already and trio_relay is within the target of it; partly a floor when that client
    is over but trio_relay is further still; "" when the client is within the target,
    and so the miss is trio_relay's own."""
    if floor_ratio <= limit:
        return ""
    if to_floor <= limit:
        return (
            f"below a floor: {floor}, the least a Trio client can do here, is "
            f"{floor_ratio:.2f}x {of} already"
        )
    return (
        f"partly a floor: {floor} is {floor_ratio:.2f}x {of}, trio_relay {to_floor:.2f}x "
        "that client"
    )


@dataclass
class Row:
    """One figure for both implementations. ``better`` says which way is good
    (``"lower"``, ``"higher"`` or ``""`` when the ratio means nothing)."""

    label: str
    unit: str
    trio: float | None
    base: float | None
    n_trio: int | None = None
    n_base: int | None = None
    better: str = "lower"
    text_trio: str | None = None
    """Shown instead of the number (e.g. "not detected")."""
    text_base: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.trio is None or self.base is None or self.base == 0:
            return None
        if math.isnan(self.trio) or math.isnan(self.base):
            return None
        return self.trio / self.base


@dataclass
class Target:
    """A target from the issue, and whether this run met it."""

    text: str
    measured: str
    met: bool
    note: str = ""


@dataclass
class Table:
    """A table of text cells, for figures that are not one `Row` per pair."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    """Printed under the table, one paragraph each."""


@dataclass
class Plot:
    """A line chart of ``series`` (name -> points (x, y)), written as ``{name}.svg``."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: dict[str, list[tuple[float, float]]]
    xlog: bool = False
    ylog: bool = False


@dataclass
class Result:
    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    configs: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, Any] = field(default_factory=dict)
    cdf: dict[str, list[float]] = field(default_factory=dict)
    """Latency samples (ms) to plot, by series name."""
    tables: list[Table] = field(default_factory=list)
    """Shown before the rows' table (the default run's summary is the first)."""
    plots: list[Plot] = field(default_factory=list)
    """Figures to draw beside the latency CDF, if any."""
    elapsed: float = 0.0


# --- tables ----------------------------------------------------------------------------

WIDTH = 100
"""Every table fits this many columns (a terminal narrower than that wraps them)."""


def fmt(value: float | None, unit: str) -> str:
    """A figure with its unit, to three significant digits or so."""
    if value is None or math.isnan(value):
        return "-"
    if unit in ("", "count"):
        return f"{value:,.0f}" if value == int(value) else f"{value:.3g}"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None or math.isnan(ratio):
        return "-"
    if ratio >= 10:
        return f"{ratio:.0f}x"
    if ratio >= 0.01:
        return f"{ratio:.2f}x"
    if ratio >= 0.0001:
        return f"{ratio:.4f}x"
    return f"{ratio:.1e}x"


def _n(row: Row) -> str:
    if row.n_trio is None and row.n_base is None:
        return ""
    if row.n_trio == row.n_base:
        return str(row.n_trio)
    return f"{row.n_trio if row.n_trio is not None else '-'}/{row.n_base or '-'}"


def rows_table(result: Result) -> Table:
    """``result.rows`` as a table: each figure for trio_relay and the client in the
    other column, and trio_relay's as a multiple of it."""
    rows = []
    for row in result.rows:
        trio = row.text_trio if row.text_trio is not None else fmt(row.trio, row.unit)
        base = row.text_base if row.text_base is not None else fmt(row.base, row.unit)
        label = row.label + (" (higher is better)" if row.better == "higher" else "")
        rows.append([label, _n(row), trio, base, fmt_ratio(row.ratio) if row.better else "-"])
    return Table(
        f"{result.name}: {result.title} ({result.elapsed:.0f} s)",
        ["figure", "n", "trio_relay", "other", "ratio"],
        rows,
        [
            "other: the asyncio baseline, or the client the figure names ('vs ...'); "
            "ratio: trio_relay's figure as a multiple of the other's, lower is better "
            "unless marked; n: samples (trio_relay/other where they differ)"
        ],
    )


def table_text(table: Table, width: int = WIDTH) -> str:
    """``table`` as plain text (no colour, no control codes), at most ``width`` wide."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=None, highlight=False, emoji=False,
        markup=False, soft_wrap=False,
    )  # fmt: skip
    rich_table = RichTable(
        title=table.title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        show_edge=False, title_style="", header_style="",
    )  # fmt: skip
    for i, column in enumerate(table.columns):
        rich_table.add_column(column, justify="left" if i == 0 else "right", overflow="fold")
    for row in table.rows:
        rich_table.add_row(*row)
    console.print(rich_table)
    for note in table.notes:
        console.print(note)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip().splitlines())


def render(result: Result, *, check: bool = False) -> str:
    """One benchmark's tables and notes; with ``check``, its targets and verdicts."""
    parts = [table_text(t) for t in result.tables]
    if result.rows:
        parts.append(table_text(rows_table(result)))
    lines = ["\n\n".join(parts)]
    lines += [wrap(f"note: {note}") for note in result.notes]
    if check:
        lines += target_lines(result)
    return "\n".join(lines)


def target_lines(result: Result) -> list[str]:
    out = []
    for target in result.targets:
        mark = "MET   " if target.met else "MISSED"
        line = f"target {mark} {target.text}: {target.measured}"
        if target.note:
            line += f" ({target.note})"
        out.append(wrap(line))
    return out


def wrap(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A paragraph wrapped to ``width``, its continuation lines indented."""
    return textwrap.fill(
        text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def targets_markdown(results: list[Result], info: dict[str, Any], mode: str) -> str:
    """Every target of the run as a Markdown table: the target, the figure measured
    beside it, and whether it was met."""
    lines = [
        f"Measured {info['date']}, mode `{mode}`, {info['cpu_count']} CPUs "
        f"({info['cpu_model']}), {info['python']}.",
        "",
        "| benchmark | target | measured | |",
        "|---|---|---|---|",
    ]
    for result in results:
        for target in result.targets:
            verdict = "met" if target.met else "**missed**"
            if not target.met and target.note:
                verdict += " " + target.note.removeprefix("missed ")
            measured = target.measured.replace("|", "/")
            lines.append(f"| {result.name} | {target.text} | {measured} | {verdict} |")
    return "\n".join(lines) + "\n"


# --- progress --------------------------------------------------------------------------


class Progress:
    """The progress of a run, phase by phase: on a terminal a bar per phase (rich), with
    its own count, elapsed time and estimate; elsewhere one plain line as each phase
    starts. Nothing is drawn between two calls (no refresh thread: its wake-ups would
    land inside the timed figures), so a benchmark advances it at least every second or
    so, and `tick` redraws during a long wait that is not timed."""

    REDRAW = 0.1
    """Seconds between two redraws at most."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self.enabled = enabled if enabled is not None else True
        self.live = self.enabled and self._stream.isatty()
        self._bars: Any = None
        self._task: Any = None
        self._phase = 0
        self._begun = time.monotonic()
        self._drawn = 0.0

    def start(self, label: str, total: int) -> None:
        """A new phase of ``total`` steps (the one before it, if any, is done)."""
        if not self.enabled:
            return
        self.finish()
        self._phase += 1
        if not self.live:
            elapsed = int(time.monotonic() - self._begun)
            self._stream.write(f"[{elapsed // 60}:{elapsed % 60:02d}] {label} ({total} steps)\n")
            self._stream.flush()
            return
        if self._bars is None:
            console = Console(file=self._stream, width=min(WIDTH, _columns(self._stream)))
            self._bars = bars.Progress(
                bars.TextColumn("{task.description}"), bars.BarColumn(bar_width=30),
                bars.MofNCompleteColumn(), bars.TimeElapsedColumn(),
                bars.TimeRemainingColumn(), console=console, auto_refresh=False,
                transient=True,
            )  # fmt: skip
            self._bars.start()
        self._task = self._bars.add_task(label[:40], total=max(total, 1))
        self._draw(force=True)

    def advance(self, steps: int = 1) -> None:
        if self._task is not None:
            self._bars.advance(self._task, steps)
            self._draw()

    def tick(self) -> None:
        """Redraw (the elapsed time moves) without a step done."""
        if self._task is not None:
            self._draw()

    def finish(self) -> None:
        """The phase under way is done."""
        if self._task is not None:
            task = self._bars.tasks[-1]
            self._bars.update(self._task, completed=task.total)
            self._draw(force=True)
            self._task = None

    def close(self) -> None:
        """The run is over: the bars are cleared."""
        self.finish()
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._drawn >= self.REDRAW:
            self._drawn = now
            self._bars.refresh()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, io.UnsupportedOperation):
        return WIDTH


# --- machine, JSON, plot ---------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "versions": {
            dist: _version(dist)
            for dist in ("trio_relay", "trio", "trio-websocket", "wsproto", "websockets")
        },
    }


def machine_line(info: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    return (
        f"machine: {info['cpu_count']} CPUs ({info['cpu_model']}), {info['platform']}, "
        f"{info['python']}; {versions}"
    )


def write_json(path: str, info: dict[str, Any], run: dict[str, Any], results: list[Result]) -> None:
    document = _finite(
        {"machine": info, "run": run, "benchmarks": {r.name: asdict(r) for r in results}}
    )
    with open(path, "w") as f:
        json.dump(document, f, indent=2, default=str, allow_nan=False)
        f.write("\n")


def _finite(value: Any) -> Any:
    """NaN and infinities become null: strict JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class PlotUnavailable(RuntimeError):
    pass


PLOT_EXTRA = "pip install -e '.[bench]'"


def plots_available() -> bool:
    """Whether matplotlib (the ``bench`` extra) is installed."""
    return importlib.util.find_spec("matplotlib") is not None


def require_matplotlib() -> None:
    """Fail early, before minutes of benchmarking, when plots were asked for and
    cannot be drawn."""
    if not plots_available():
        raise PlotUnavailable(
            f"plots need matplotlib, which is not installed; install the bench extra "
            f"({PLOT_EXTRA}), or pass --no-plot"
        )


def write_plots(
    directory: str, results: list[Result], machine: str = "", image_format: str = "svg"
) -> list[str]:
    """Every result's latency CDF (``{name}-cdf.svg``) and its other plots
    (``{plot.name}.svg``) into ``directory`` (made if missing); the paths written.
    ``machine``, when given, is printed small under each title."""
    require_matplotlib()
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    # SVG text stays text, and the file is the same for the same figures (no date, fixed
    # ids), so a committed plot changes only when its figures do.
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "trio_relay"})
    plt = importlib.import_module("matplotlib.pyplot")
    os.makedirs(directory, exist_ok=True)
    written = []
    for result in results:
        if any(result.cdf.values()):
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for name, samples in result.cdf.items():
                ordered = sorted(s for s in samples if s > 0)
                if ordered:
                    ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
                    ax.step(ordered, ys, where="post", label=f"{name} (n={len(ordered)})")
            ax.set_xscale("log")
            ax.set_xlabel("milliseconds (log scale)")
            ax.set_ylabel("fraction of samples at or below")
            path = os.path.join(directory, f"{result.name}-cdf.{image_format}")
            written.append(_save(fig, ax, f"{result.name}: {result.title}", machine, path))
        for plot in result.plots:
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for name, points in plot.series.items():
                if points:
                    ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
            if plot.xlog:
                ax.set_xscale("log")
                ticks = sorted({x for points in plot.series.values() for x, _ in points})
                ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
            if plot.ylog:
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
            ax.set_xlabel(plot.xlabel)
            ax.set_ylabel(plot.ylabel)
            path = os.path.join(directory, f"{plot.name}.{image_format}")
            written.append(_save(fig, ax, plot.title, machine, path))
    return written


def _save(fig: Any, ax: Any, title: str, machine: str, path: str) -> str:
    ax.set_title(title + (f"\n{machine}" if machine else ""), fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    fig.clear()
    importlib.import_module("matplotlib.pyplot").close(fig)
    return path
