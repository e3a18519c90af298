"""Run benchmarks by name and report them; ``trio-relay bench`` calls `run_benchmarks`.

Each benchmark module has ``run(ctx) -> Result``. The connector always runs in a process
of its own, so it never shares an event loop (or the GIL) with the client under test.
With ``pin`` (``--pin``) and at least two CPUs it is pinned to the last CPU and this
process (with anything it spawns) to the others. That is off by default: pinned, every
message wakes a process on the other CPU (costly on virtual machines), and any other load
on either CPU lands in full on one side; unpinned, the scheduler places the two where it
sees fit, as it would in production.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from ._context import Context, plan_cpus
from ._report import (
    PLOT_EXTRA,
    Progress,
    Result,
    machine_info,
    machine_line,
    plots_available,
    render,
    require_matplotlib,
    targets_markdown,
    wrap,
    write_json,
    write_plots,
)

__all__ = ["ALL", "BENCHMARKS", "DEFAULT", "PLOT_DIR", "run_benchmarks"]

BENCHMARKS: dict[str, str] = {
    "compare": "trio_relay beside the asyncio design and minimal Trio clients: redial, "
    "CPU per request at 1/16/256 in flight (about 2 minutes)",
    "cost": "counted, not timed: instructions per request and per redial (callgrind), "
    "bytes per idle relay (tracemalloc); needs valgrind",
    "redial": "dropped connection -> successful request (4 kinds; a healthy link's first "
    "and second drop; a connector restart)",
    "redial_steps": "zero-backoff redial after a reset, step by step (where the time goes)",
    "inflight": "K requests in flight when the socket dies: time until all callers know",
    "detect": "a silent peer (ping 1 s / timeout 2 s): time to detect, to reconnect",
    "throughput": "1, 16, 256 requesters (and 10 KiB at 16) on one connection, fast "
    "connector: req/s, client CPU per request",
    "inbound": "events/s through decode + dedupe + handler + ack",
    "memory": "500 idle relays in one process: RSS per relay",
}
DEFAULT = "compare"
PLOT_DIR = "bench-plots"
"""Where the plots go unless ``--plot DIR`` says otherwise (relative to the current directory)."""
ALL = [name for name in BENCHMARKS if name != "cost"]
"""``bench all``: every timed benchmark (``cost`` needs valgrind, and runs on its own)."""

Runner = Callable[[Context], Result]


def _runner(name: str) -> Runner:
    module = importlib.import_module(f"{__package__}.{name}")
    runner: Runner = module.run
    return runner


def _load() -> str:
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return " ".join(f"{v:.2f}" for v in os.getloadavg()) + " (1, 5, 15 min)"


def run_benchmarks(
    names: Sequence[str],
    *,
    mode: str = "default",
    n: int | None = None,
    json_path: str | None = None,
    plot_dir: str | None = None,
    plot_required: bool = False,
    markdown_path: str | None = None,
    pin: bool = False,
    check: bool = False,
    out: TextIO | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """Run ``names`` in order, printing each one's tables as it completes; returns the
    results. ``plot_dir``: write the plots there (when matplotlib is installed; with
    ``plot_required``, fail at once when it is not). ``check``: print every target with
    its verdict (the caller decides the exit status from ``Target.met``)."""
    out = out if out is not None else sys.stdout
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    if plot_dir is not None and plot_required:
        require_matplotlib()
    # The faults are on purpose: quiet their logs for the run, and restore the levels
    # after (tests call this in-process, and later tests read those loggers).
    quieted = {
        name: logging.getLogger(name).level
        for name in ("trio_relay", "websockets", "trio_relay_benchmarks.baseline")
    }
    for name in quieted:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    connector_cpu, client_cpus = plan_cpus(pin)
    ctx = Context(
        mode=mode,
        n=n,
        progress=progress if progress is not None else Progress(),
        connector_cpu=connector_cpu,
        client_cpus=client_cpus,
    )
    info = machine_info()
    original = os.sched_getaffinity(0) if client_cpus is not None else None
    if client_cpus is not None:
        os.sched_setaffinity(0, client_cpus)
    results: list[Result] = []
    runners = {name: _runner(name) for name in names}  # imported before the freeze
    # Every import is done: what exists now (both clients, the peers, the baseline, this
    # harness: about 40,000 objects) is kept out of the cyclic collector's scans for the
    # run, both clients alike; undone after. A full collection otherwise scans all of it:
    # 26 ms (gc.callbacks), the one full collection of a default redial run, paid by
    # whichever client was being timed. (The connectors do the same: _connector_args.)
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    load_start = _load()
    try:
        print(wrap(machine_line(info)), file=out)
        pinning = (
            f"connector on CPU {connector_cpu}, client on {client_cpus}"
            if client_cpus is not None
            else "none (--pin to pin)"
        )
        print(
            wrap(
                f"load average {load_start}; pinning: {pinning}; mode: {mode}"
                + (f", n={n}" if n is not None else "")
            ),
            file=out,
        )
        for name in names:
            started = time.monotonic()
            result = runners[name](ctx)
            result.elapsed = time.monotonic() - started
            results.append(result)
            ctx.progress.close()
            print("\n" + render(result, check=check), file=out, flush=True)
    finally:
        ctx.progress.close()
        gc.unfreeze()
        if original is not None:
            os.sched_setaffinity(0, original)
        for name, level in quieted.items():
            logging.getLogger(name).setLevel(level)
    load_end = _load()
    print(f"\nload average at end: {load_end}", file=out)
    run_info = {
        "load_average_start": load_start,
        "load_average_end": load_end,
        "argv": sys.argv,
        "benchmarks": list(names),
        "mode": mode,
        "n": n,
        "connector_cpu": connector_cpu,
        "client_cpus": client_cpus,
        "gc_frozen_objects": frozen,
    }
    if json_path is not None:
        write_json(json_path, info, run_info, results)
        print(f"\nwrote {json_path}", file=out)
    if markdown_path is not None:
        with open(markdown_path, "w") as f:
            f.write(targets_markdown(results, info, mode))
        print(f"wrote {markdown_path}", file=out)
    if plot_dir is not None:
        if not plots_available():
            print(f"no plots: matplotlib is not installed ({PLOT_EXTRA})", file=out)
        else:
            written = write_plots(plot_dir, results, _plot_caption(info))
            if written:
                print(wrap("plots: " + ", ".join(written)), file=out)
    return results


def _plot_caption(info: dict[str, object]) -> str:
    return f"{info['date']}, {info['cpu_count']} CPUs ({info['cpu_model']}), {info['python']}"
