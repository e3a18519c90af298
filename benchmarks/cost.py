"""``cost``: what a client costs, counted rather than timed, so that the figure does not
move with the machine's noise.

Each client runs a fixed workload (``cost_workload.py``) in a process of its own under
valgrind's callgrind, which counts the CPU instructions the process executes (user
space: the kernel's share of a system call is not in them; the calls themselves are
counted beside). The connector is the fast one in lockstep (``fast_connector.py``): a
batch of K requests is answered in one message once all K arrived, so every run reads
and writes the same messages whatever the timing. Between phases the workload calls
``os.getpgrp()``, where callgrind writes what it counted so far; each phase (after a
warm-up counted apart and not used) is therefore counted on its own, without the
start-up, the imports or the other phases. The figures:

- **instructions per request** at 1, 16 and 256 in flight: K requesters, each making
  requests one after another, the connector answering each K at once;
- **instructions per redial**, from the connection's end being read to the first
  request's result: a request the connector answers with a TCP reset, the client
  dialling, upgrading and handshaking again, one request; less one request at 1 in
  flight (the reset request's own);
- **bytes per idle relay**: ``tracemalloc``'s traced bytes held by N more idle,
  connected clients in one process (no valgrind), and their tasks.

For trio_relay, the asyncio baseline (the design it replaces) and the Trio floor client
(``floor_client.py``: the least a Trio client does on this wire; it encodes an action
once and reuses the bytes, which no real client can, so the cost of that encoding is
counted beside it). Every client runs ``repeats`` times and the report gives the spread.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ROOT, module_argv
from ._backends import BASELINE, TRIO_RELAY
from ._context import Context
from ._report import Result, Table, Target, fmt_ratio, median
from .floor_client import FLOOR_BACKEND, FLOOR_CLIENT

__all__ = [
    "PLANS",
    "REFERENCE",
    "CostUnavailable",
    "count_client",
    "environment",
    "per_unit",
    "run",
    "valgrind_unavailable",
    "write_reference",
    "read_reference",
    "count_reference",
]

CLIENTS = (TRIO_RELAY.name, BASELINE.name, FLOOR_BACKEND.name)
SHOWN = {TRIO_RELAY.name: "trio_relay", BASELINE.name: "asyncio design",
         FLOOR_BACKEND.name: FLOOR_CLIENT.removeprefix("the ")}  # fmt: skip

Plan = list[dict[str, Any]]
# count: requests per requester (a round is K requests), redials, encodings. The counts
# repeat run to run (lockstep), so a small plan is enough: about 35 s of callgrind for
# trio_relay, a minute for the asyncio design.
_DEFAULT_PLAN: Plan = [
    {"name": "requests@1", "count": 50, "warm": 10},
    {"name": "requests@16", "count": 8, "warm": 2},
    {"name": "requests@256", "count": 2, "warm": 1},
    {"name": "redial", "count": 5, "warm": 2},
]
_SMALL_PLAN: Plan = [
    {"name": "requests@1", "count": 10, "warm": 2},
    {"name": "requests@16", "count": 2, "warm": 1},
    {"name": "requests@256", "count": 1, "warm": 1},
    {"name": "redial", "count": 2, "warm": 1},
]
PLANS: dict[str, Plan] = {"default": _DEFAULT_PLAN, "quick": _SMALL_PLAN, "tiny": _SMALL_PLAN}
ENCODE = {"name": "encode", "count": 2000, "warm": 200}
"""The floor client's extra phase: what it leaves out of every request."""
IDLE = {"default": 200, "quick": 50, "tiny": 20}
"""Idle clients measured, after five to warm up."""

REFERENCE = ROOT / "cost_reference.json"
"""trio_relay's counts the CI test holds the library to (``--update-reference``)."""
REGRESSION = 0.05
"""The CI test fails when a count grows by more than this over the reference."""

FIGURES = ("request@1", "request@16", "request@256", "redial")
LABELS = {
    "request@1": "instructions per request, 1 in flight",
    "request@16": "instructions per request, 16 in flight",
    "request@256": "instructions per request, 256 in flight",
    "redial": "instructions per redial",
}

# Targets (the figure, the client it is held against, at most this ratio).
TARGETS: tuple[tuple[str, str, float], ...] = (
    ("request@16", FLOOR_BACKEND.name, 1.1),
    ("request@256", FLOOR_BACKEND.name, 1.1),
    ("request@256", BASELINE.name, 0.35),
    ("redial", FLOOR_BACKEND.name, 1.1),
    ("redial", BASELINE.name, 0.8),
)
IDLE_BYTES_TARGET = 1.0
IDLE_TASKS_TARGET = 2


class CostUnavailable(RuntimeError):
    """valgrind is missing, or a counted run failed."""


def valgrind_unavailable() -> str | None:
    """Why callgrind cannot count here, or None when it can."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    return None


@dataclass
class Counted:
    """One counted run of one client: by phase, its events (``Ir``: instructions,
    ``sysCount``: system calls)."""

    client: str
    phases: dict[str, dict[str, int]]


def count_client(
    client: str, url: str, plan: Plan, *, on_wait: Any = None, timeout: float = 900
) -> Counted:
    """Run ``client``'s workload for ``plan`` under callgrind against the lockstep
    connector at ``url`` (its base URL); the events of each counted phase."""
    reason = valgrind_unavailable()
    if reason is not None:
        raise CostUnavailable(reason)
    with tempfile.TemporaryDirectory(prefix="trio-relay-cost-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        argv = [
            "valgrind", "--tool=callgrind", "--collect-systime=yes",
            "--dump-before=getpgrp", "--dump-line=no", f"--callgrind-out-file={out}", "-q",
            *module_argv(f"{__package__}.cost_workload"),
            "--client", client, "--url", url.rstrip("/") + "/cost", "--plan", json.dumps(plan),
        ]  # fmt: skip
        # A fixed hash seed: the same dict and set layouts, and so the same instructions,
        # in every run.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.communicate()
                    raise CostUnavailable(
                        f"{client}: the counted run took over {timeout:g} s"
                    ) from None
                if on_wait is not None:
                    on_wait()
        if proc.returncode != 0 or '"ok": true' not in stdout:
            raise CostUnavailable(
                f"{client}: the counted run failed (exit {proc.returncode}):\n{stderr[-3000:]}"
            )
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        # Dump 1 is the start-up and the first warm-up; then each phase's count, then
        # the next phase's warm-up, and so on.
        expected = 2 * len(plan)
        if len(dumps) < expected:
            raise CostUnavailable(f"{client}: {len(dumps)} callgrind dumps, expected {expected}")
        phases = {phase["name"]: _events(dumps[2 * i + 1]) for i, phase in enumerate(plan)}
    return Counted(client, phases)


def _events(path: Path) -> dict[str, int]:
    names: list[str] = []
    totals: list[int] = []
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("totals:"):
                totals = [int(v) for v in line.split()[1:]]
    return dict(zip(names, totals + [0] * (len(names) - len(totals)), strict=True))


def per_unit(plan: Plan, counted: Counted, event: str = "Ir") -> dict[str, float]:
    """Per request (by concurrency), per redial and per encoding, from ``counted``."""
    figures: dict[str, float] = {}
    for phase in plan:
        name, count = phase["name"], int(phase["count"])
        total = counted.phases[name].get(event, 0)
        if name.startswith("requests@"):
            k = int(name.removeprefix("requests@"))
            figures[f"request@{k}"] = total / (k * count)
        else:
            figures[name] = total / count
    if "redial" in figures and "request@1" in figures:
        # The reset request's own cost is not the redial's.
        figures["redial"] -= figures["request@1"]
    return figures


def idle(client: str, url: str, n: int) -> dict[str, float]:
    """Bytes and tasks per idle, connected client (tracemalloc, no valgrind)."""
    argv = [*module_argv(f"{__package__}.cost_workload"), "--client", client,
            "--url", url, "--idle", str(n)]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise CostUnavailable(f"{client}: the idle run failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"bytes": figures["bytes"] / n, "tasks": figures["tasks"] / n}


def environment() -> dict[str, Any]:
    """What a count depends on besides the code: the interpreter and the libraries on
    the measured path, and valgrind."""
    import platform
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    try:
        valgrind = subprocess.run(
            ["valgrind", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        valgrind = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "valgrind": valgrind,
        **{dist: version(dist) for dist in ("trio", "websockets", "msgspec", "outcome")},
    }


# --- the benchmark ---------------------------------------------------------------------


def run(ctx: Context) -> Result:
    reason = valgrind_unavailable()
    if reason is not None:
        raise CostUnavailable(f"bench cost needs valgrind's callgrind: {reason}")
    plan = PLANS[ctx.mode]
    repeats = ctx.count(2, 1, 1)
    n_idle = IDLE[ctx.mode]
    runs: dict[str, list[Counted]] = {c: [] for c in CLIENTS}
    idles: dict[str, list[dict[str, float]]] = {c: [] for c in CLIENTS}
    plans = {c: plan + ([ENCODE] if c == FLOOR_BACKEND.name else []) for c in CLIENTS}
    ctx.progress.start("cost: counted runs under callgrind", repeats * len(CLIENTS))
    with ctx.connector(fast=True) as proc:
        for r in range(repeats):
            order = CLIENTS[r % 3 :] + CLIENTS[: r % 3]
            for client in order:
                runs[client].append(
                    count_client(client, proc.url, plans[client], on_wait=ctx.progress.tick)
                )
                ctx.progress.advance()
        ctx.progress.start("cost: idle clients (tracemalloc)", repeats * len(CLIENTS))
        for _ in range(repeats):
            for client in CLIENTS:
                idles[client].append(idle(client, proc.url, n_idle))
                ctx.progress.advance()
    ctx.progress.finish()
    return report(plans, runs, idles, n_idle, repeats)


def report(
    plans: dict[str, Plan],
    runs: dict[str, list[Counted]],
    idles: dict[str, list[dict[str, float]]],
    n_idle: int,
    repeats: int,
) -> Result:
    """The report of counted runs (also used on the JSON of an earlier run)."""
    ir = {c: [per_unit(plans[c], counted) for counted in runs[c]] for c in CLIENTS}
    calls = {c: [per_unit(plans[c], counted, "sysCount") for counted in runs[c]] for c in CLIENTS}

    def med(by_run: list[dict[str, float]], key: str) -> float:
        return median([figures[key] for figures in by_run])

    def spread(values: list[float]) -> float:
        return (max(values) - min(values)) / median(values) if len(values) > 1 else 0.0

    out = Result("cost", "counted costs under callgrind (instructions, system calls, bytes)")
    rows = []
    spreads: dict[str, float] = {}
    for key in FIGURES:
        spreads[key] = max(spread([f[key] for f in ir[c]]) for c in CLIENTS)
        ours = med(ir[TRIO_RELAY.name], key)
        cells = [LABELS[key], _count(ours)]
        for other in (BASELINE.name, FLOOR_BACKEND.name):
            theirs = med(ir[other], key)
            cells.append(f"{_count(theirs)} ({fmt_ratio(ours / theirs)})")
        cells.append(_percent(spreads[key]) if repeats > 1 else "-")
        rows.append(cells)
    for key in ("request@16", "redial"):
        ours = med(calls[TRIO_RELAY.name], key)
        cells = [f"system calls per {'request, 16 in flight' if key != 'redial' else 'redial'}",
                 f"{ours:.2f}"]  # fmt: skip
        for other in (BASELINE.name, FLOOR_BACKEND.name):
            theirs = med(calls[other], key)
            cells.append(f"{theirs:.2f} ({fmt_ratio(ours / theirs if theirs else None)})")
        worst = max(spread([f[key] for f in calls[c]]) for c in CLIENTS)
        cells.append(_percent(worst) if repeats > 1 else "-")
        rows.append(cells)
    idle_bytes = {c: median([f["bytes"] for f in idles[c]]) for c in CLIENTS}
    idle_tasks = {c: median([f["tasks"] for f in idles[c]]) for c in CLIENTS}
    idle_spread = max(spread([f["bytes"] for f in idles[c]]) for c in CLIENTS)
    ours_idle = idle_bytes[TRIO_RELAY.name]
    rows.append(
        ["bytes per idle relay (tracemalloc)", _bytes(ours_idle)]
        + [f"{_bytes(idle_bytes[o])} ({fmt_ratio(ours_idle / idle_bytes[o])})"
           for o in (BASELINE.name, FLOOR_BACKEND.name)]
        + [_percent(idle_spread) if repeats > 1 else "-"]
    )  # fmt: skip
    rows.append(
        ["tasks per idle relay", f"{idle_tasks[TRIO_RELAY.name]:g}"]
        + [f"{idle_tasks[o]:g}" for o in (BASELINE.name, FLOOR_BACKEND.name)] + ["-"]
    )  # fmt: skip
    encode = med(ir[FLOOR_BACKEND.name], "encode")
    floor16 = med(ir[FLOOR_BACKEND.name], "request@16")
    out.tables.append(
        Table(
            "Counted cost per unit of work (median of runs; lower is better)",
            ["figure", "trio_relay", "asyncio design", SHOWN[FLOOR_BACKEND.name], "spread"],
            rows,
            [
                "In brackets: trio_relay's count as a multiple of that client's. Spread: the "
                f"largest (max - min) / median over {repeats} runs of any of the three "
                "clients. Instructions are the client process's own (valgrind's callgrind, "
                "user space); a system call's work in the kernel is not in them, so the "
                "system calls are counted beside them. A redial is counted from the "
                "connection's end being read to the first request's result.",
                f"The {FLOOR_CLIENT.removeprefix('the ')} encodes an action once and reuses "
                f"the bytes; encoding it anew (msgspec), as any real client must, costs "
                f"{_count(encode)} instructions a request ({encode / floor16:.0%} of its "
                "16-way figure).",
            ],
        )
    )
    for key, other, limit in TARGETS:
        ours, theirs = med(ir[TRIO_RELAY.name], key), med(ir[other], key)
        ratio = ours / theirs
        met = ratio <= limit
        note = ""
        if not met:
            note = _floor_note(key, other, limit, ir, encode)
        out.targets.append(
            Target(
                f"{LABELS[key]} <= {limit:g}x {SHOWN[other]}'s",
                f"{ratio:.3f}x ({_count(ours)} vs {_count(theirs)}; spread "
                f"{_percent(spreads[key])} over {repeats} runs)",
                met,
                note,
            )
        )
    base_idle = idle_bytes[BASELINE.name]
    met = ours_idle <= IDLE_BYTES_TARGET * base_idle
    out.targets.append(
        Target(
            f"bytes per idle relay <= {IDLE_BYTES_TARGET:g}x the asyncio design's",
            f"{ours_idle / base_idle:.3f}x ({_bytes(ours_idle)} vs {_bytes(base_idle)}, "
            f"{n_idle} relays)",
            met,
            "" if met else f"missed by {_bytes(ours_idle - base_idle)}",
        )
    )
    tasks = idle_tasks[TRIO_RELAY.name]
    out.targets.append(
        Target(
            f"tasks per idle relay <= {IDLE_TASKS_TARGET}",
            f"{tasks:g}",
            tasks <= IDLE_TASKS_TARGET,
        )
    )
    out.notes.append(
        "lockstep connector (benchmarks/fast_connector.py): each batch of K requests is "
        "answered in one message once all K arrived, so every run exchanges the same "
        f"messages; {json.dumps(plans[TRIO_RELAY.name])}; PYTHONHASHSEED=0; idle: "
        f"{n_idle} clients after 5 to warm up"
    )
    out.configs = {"plans": plans, "environment": environment()}
    out.samples = {
        "instructions": {c: ir[c] for c in CLIENTS},
        "system_calls": {c: calls[c] for c in CLIENTS},
        "idle": idles,
        "raw": {c: [counted.phases for counted in runs[c]] for c in CLIENTS},
    }
    return out


def _floor_note(
    key: str, other: str, limit: float, ir: dict[str, list[dict[str, float]]], encode: float
) -> str:
    """What a missed target is held against: for one against the floor client, that
    client plus the one piece of work it leaves out (encoding each action)."""
    floor = median([f[key] for f in ir[FLOOR_BACKEND.name]])
    ours = median([f[key] for f in ir[TRIO_RELAY.name]])
    if other == FLOOR_BACKEND.name:
        if key == "redial":
            return f"trio_relay's redial is {_count(ours - floor)} instructions over the floor's"
        with_encode = floor + encode
        verdict = (
            "below a floor: the floor client encoding each action is over the target already"
            if with_encode > limit * floor
            else f"the floor client encoding each action is {with_encode / floor:.2f}x "
            "the floor; the rest is trio_relay's own"
        )
        return verdict
    theirs = median([f[key] for f in ir[other]])
    floor_ratio = floor / theirs
    if floor_ratio > limit:
        return f"below a floor: the floor client is {floor_ratio:.2f}x already"
    return (
        f"the floor client is {floor_ratio:.2f}x, so the target is above the floor; "
        f"trio_relay is {ours / floor:.2f}x the floor client"
    )


def _count(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3f} M"
    return f"{value / 1e3:.1f} k"


def _bytes(value: float) -> str:
    return f"{value / 1024:.2f} KiB" if abs(value) >= 1024 else f"{value:.0f} B"


def _percent(value: float) -> str:
    return f"{value * 100:.2f}%"


REFERENCE_PLAN = "default"
"""The plan the reference and the CI test count (about 35 s of trio_relay under callgrind)."""
REFERENCE_RUNS = 3


def count_reference(url: str, on_wait: Any = None) -> dict[str, float]:
    """trio_relay's instructions per unit on the reference plan, one counted run."""
    plan = PLANS[REFERENCE_PLAN]
    return per_unit(plan, count_client(TRIO_RELAY.name, url, plan, on_wait=on_wait))


def write_reference(url: str, path: Path = REFERENCE, on_wait: Any = None) -> Path:
    """Count trio_relay on the reference plan ``REFERENCE_RUNS`` times against the
    lockstep connector at ``url`` and make the medians the reference the CI test holds
    the library to (on purpose: the commit says why)."""
    runs = [count_reference(url, on_wait) for _ in range(REFERENCE_RUNS)]
    document = {
        "about": "trio_relay's callgrind counts the cost regression test holds the library "
        f"to (tests/integration/test_cost.py: fails above +{REGRESSION:.0%}); written by "
        "trio-relay bench cost --update-reference",
        "plan": PLANS[REFERENCE_PLAN],
        "instructions": {k: round(median([f[k] for f in runs])) for k in FIGURES},
        "spread": {
            k: round((max(f[k] for f in runs) - min(f[k] for f in runs)) / median(
                [f[k] for f in runs]), 5) for k in FIGURES
        },
        "environment": environment(),
    }  # fmt: skip
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def read_reference(path: Path = REFERENCE) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document
