"""``memory``: N idle, connected relays in one process; resident memory per relay.

Each measurement runs in a fresh child process (``python -m
trio_relay_benchmarks.memory --child IMPL``) so that neither implementation inherits the
other's heap: it opens ``WARM`` relays first (imports, first-use caches, the event loop),
reads VmRSS, opens N more, waits until all are connected and idle, and reads VmRSS again.
The difference over N is the figure. The child runs the same code for both
implementations, through the benchmarks' :class:`._backends.Backend` interface.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack

from trio_relay.testing import rss_bytes

from . import module_argv
from ._backends import BACKENDS, BASELINE, TRIO_RELAY, Backend, alternate
from ._context import Context
from ._report import Result, Row, Target, median

__all__ = ["run"]

WARM = 10
SETTLE = 0.3


def _rss_kib() -> int:
    rss = rss_bytes()
    if rss is None:
        raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")
    return rss // 1024


async def _child(backend: Backend, url: str, n: int) -> None:
    """In ``backend``'s event loop: warm up, measure, open ``n`` more, measure, exit."""
    async with AsyncExitStack() as stack:

        async def open_some(count: int) -> None:
            clients = [
                await stack.enter_async_context(backend.client(url, {})) for _ in range(count)
            ]
            for client in clients:
                await client.wait_connected(60)

        await open_some(WARM)
        await backend.sleep(SETTLE)
        gc.collect()
        before, tasks_before = _rss_kib(), backend.tasks_now()
        await open_some(n)
        await backend.sleep(SETTLE)
        gc.collect()
        after, tasks_after = _rss_kib(), backend.tasks_now()
        _exit({"before": before, "after": after, "n": n, "tasks": tasks_after - tasks_before})


def _exit(figures: dict[str, int]) -> None:
    # Print and leave at once: tearing down hundreds of relays measures nothing.
    print(json.dumps(figures), flush=True)
    os._exit(0)


def _measure(impl: str, url: str, n: int) -> dict[str, int]:
    argv = [*module_argv("trio_relay_benchmarks.memory"), "--child", impl, url, str(n)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"memory child {impl} failed ({done.returncode}): {done.stderr[-2000:]}")
    figures: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run(ctx: Context) -> Result:
    n = ctx.count(500, 500, 50)
    # Seven fresh processes each: the baseline's figure moves by up to 7% from one to the
    # next (21.5-23.0 KiB in the three processes of one run), more than the two differ by.
    rounds = ctx.pick(7, 1, 1)
    per_relay: dict[str, list[float]] = {"trio_relay": [], "baseline": []}
    raw: dict[str, list[dict[str, int]]] = {"trio_relay": [], "baseline": []}
    ctx.progress.start("memory", rounds * 2)
    with ctx.connector() as proc:
        for r in range(rounds):
            for backend in alternate(r):
                figures = _measure(backend.name, proc.url, n)
                raw[backend.name].append(figures)
                per_relay[backend.name].append((figures["after"] - figures["before"]) / n)
                ctx.progress.advance()
    ctx.progress.finish()

    result = Result("memory", f"{n} idle connected relays in one process")
    tr, bl = per_relay["trio_relay"], per_relay["baseline"]
    result.rows.append(
        Row("RSS per idle relay, median of runs", "KiB", median(tr), median(bl), len(tr), len(bl))
    )
    result.rows.append(
        Row(
            f"process RSS with {WARM} relays (imports, loop)",
            "KiB",
            median([f["before"] for f in raw["trio_relay"]]),
            median([f["before"] for f in raw["baseline"]]),
            len(tr),
            len(bl),
        )
    )
    result.rows.append(
        Row(
            "tasks per idle relay",
            "",
            median([f["tasks"] / n for f in raw["trio_relay"]]),
            median([f["tasks"] / n for f in raw["baseline"]]),
            len(tr),
            len(bl),
        )
    )
    met = median(tr) <= median(bl)
    result.targets.append(
        Target(
            "RSS per idle relay <= 1.0x the baseline's (500 relays in one process)",
            f"{median(tr) / median(bl):.2f}x ({median(tr):.1f} vs {median(bl):.1f} KiB, "
            f"{n} relays)",
            met,
            "" if met else f"missed by {median(tr) - median(bl):.1f} KiB per relay",
        )
    )
    result.notes.append(
        f"each run a fresh child process: {WARM} relays to warm up, then {n} more, all "
        f"connected and idle; VmRSS delta / {n}; default configs"
    )
    result.configs = {b.name: b.config({}) for b in (TRIO_RELAY, BASELINE)}
    result.samples = {"per_relay_kib": per_relay, "raw_kib": raw}
    return result


def _child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m trio_relay_benchmarks.memory")
    parser.add_argument("--child", choices=["trio_relay", "baseline"], required=True)
    parser.add_argument("url")
    parser.add_argument("n", type=int)
    args = parser.parse_args(argv)
    backend = {b.name: b for b in BACKENDS}[args.child]
    backend.run(lambda: _child(backend, args.url, args.n))


if __name__ == "__main__":
    _child_main(sys.argv[1:])
