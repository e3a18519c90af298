"""What a benchmark returns, and how it is shown: table, progress bar, JSON, CDF plot."""

from __future__ import annotations

import datetime
import importlib
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, TextIO

__all__ = [
    "Progress",
    "Result",
    "Row",
    "Target",
    "floor_share",
    "machine_info",
    "percentile",
    "render",
    "targets_markdown",
    "thin",
    "write_json",
    "write_plot",
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
    elapsed: float = 0.0


# --- table -----------------------------------------------------------------------------


def _fmt(value: float | None, unit: str) -> str:
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


def _fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if ratio >= 10:
        return f"{ratio:.0f}"
    if ratio >= 0.01:
        return f"{ratio:.2f}"
    if ratio >= 0.0001:
        return f"{ratio:.4f}"
    return f"{ratio:.1e}"


def _n(row: Row) -> str:
    if row.n_trio is None and row.n_base is None:
        return ""
    if row.n_trio == row.n_base:
        return str(row.n_trio)
    return f"{row.n_trio if row.n_trio is not None else '-'}/{row.n_base or '-'}"


def render(result: Result) -> str:
    """The fixed-width table of one benchmark, with its notes and targets."""
    label_w = max([len(r.label) for r in result.rows] + [24])
    lines = [
        f"== {result.name}: {result.title}  ({result.elapsed:.1f} s)",
        f"{'figure':<{label_w}}  {'n':>9}  {'trio_relay':>12}  {'baseline':>12}  "
        f"{'ratio':>7}  better",
        "-" * (label_w + 60),
    ]
    for row in result.rows:
        trio = row.text_trio if row.text_trio is not None else _fmt(row.trio, row.unit)
        base = row.text_base if row.text_base is not None else _fmt(row.base, row.unit)
        ratio = _fmt_ratio(row.ratio) if row.better else "-"
        lines.append(
            f"{row.label:<{label_w}}  {_n(row):>9}  {trio:>12}  {base:>12}  "
            f"{ratio:>7}  {row.better}"
        )
    lines.append("ratio = trio_relay / baseline; n = samples (trio_relay/baseline if unequal)")
    for note in result.notes:
        lines.append(f"note: {note}")
    for target in result.targets:
        mark = "MET   " if target.met else "MISSED"
        line = f"target {mark} {target.text}: {target.measured}"
        if target.note:
            line += f" ({target.note})"
        lines.append(line)
    return "\n".join(lines)


def targets_markdown(results: list[Result], info: dict[str, Any], mode: str) -> str:
    """Every target of the run as a Markdown table (for RESULTS.md and the README):
    the target, the figure measured beside it, and whether it was met."""
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
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = self._stream.isatty() if enabled is None else enabled
        self._label = ""
        self._total = 0
        self._done = 0
        self._started = 0.0
        self._drawn = 0.0

    def start(self, label: str, total: int) -> None:
        self._label, self._total, self._done = label, max(total, 1), 0
        self._started = time.monotonic()
        self._draw(force=True)

    def advance(self, steps: int = 1) -> None:
        self._done = min(self._done + steps, self._total)
        self._draw()

    def finish(self) -> None:
        if self.enabled:
            self._stream.write("\r" + " " * (self.WIDTH + 50) + "\r")
            self._stream.flush()

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.05 and self._done < self._total:
            return
        self._drawn = now
        filled = self.WIDTH * self._done // self._total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(
            f"\r{self._label[:16]:<16} [{bar}] {self._done}/{self._total} "
            f"{now - self._started:5.1f} s"
        )
        self._stream.flush()


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


def require_matplotlib() -> None:
    """Fail early, before minutes of benchmarking, when ``--plot`` cannot work."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib, which is not installed; install the optional extra: "
            "pip install 'trio_relay[plot]'"
        ) from None


def write_plot(path: str, results: list[Result]) -> bool:
    """A latency CDF per benchmark that has latency samples; false if none had any."""
    require_matplotlib()
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")

    with_cdf = [r for r in results if r.cdf]
    if not with_cdf:
        return False
    fig, axes = plt.subplots(len(with_cdf), 1, figsize=(8, 4 * len(with_cdf)), squeeze=False)
    for ax, result in zip(axes[:, 0], with_cdf, strict=True):
        for name, samples in result.cdf.items():
            ordered = sorted(s for s in samples if s > 0)
            if not ordered:
                continue
            ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
            ax.step(ordered, ys, where="post", label=f"{name} (n={len(ordered)})")
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel("fraction of samples")
        ax.set_title(f"{result.name}: {result.title}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
