"""``throughput``: C concurrent requesters sharing one connection (C = 1, 16, 256), the
connector answering at once: completed requests per second and per-request latency.

Each round warms the connection up, then every requester loops request -> result until
the window closes. Rounds alternate the implementations.
"""

from __future__ import annotations

import time

from ._backends import ACTION, BASELINE, TRIO_RELAY, Backend, Client, Control, alternate
from ._backends import run_session as session
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, Target, median, percentile, thin

CONCURRENCY = (1, 16, 256)
Window = tuple[float, list[float], int, tuple[float, float]]
TARGETS = {256: 3.0, 16: 2.0, 1: 0.8}
"""Minimum throughput ratio trio_relay / baseline the issue asks for."""


def _window(
    ctx: Context, backend: Backend, proc: ConnectorProcess, c: int, warmup: float, seconds: float
) -> Window:
    """One measured window: requests/s, latencies (ms), failures, and the CPU share
    (0..1) the client and the connector process used during it."""

    async def body(client: Client, ctl: Control) -> Window:
        latencies: list[float] = []
        failures = 0
        measuring = False
        stop_at = time.perf_counter() + warmup

        async def requester() -> None:
            nonlocal failures
            while True:
                t0 = time.perf_counter()
                if t0 >= stop_at:
                    return
                reply = await client.request(ACTION, 30.0)
                if measuring:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    failures += not reply.success

        await backend.gather([requester] * c)  # warm-up
        measuring = True
        server_cpu = float((await ctl.call("cpu"))["cpu"])
        client_cpu = time.process_time()
        started = time.perf_counter()
        stop_at = started + seconds
        await backend.gather([requester] * c)
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        server_cpu = float((await ctl.call("cpu"))["cpu"]) - server_cpu
        ctx.progress.advance()
        busy = (client_cpu / elapsed, server_cpu / elapsed)
        return len(latencies) / elapsed, latencies, failures, busy

    return session(backend, proc, {}, body)


def run(ctx: Context) -> Result:
    rounds = ctx.count(3, 1, 1)
    seconds = ctx.pick(1.0, 0.5, 0.2)
    warmup = ctx.pick(0.2, 0.1, 0.05)
    rates: dict[tuple[str, int], list[float]] = {}
    latencies: dict[tuple[str, int], list[float]] = {}
    failures: dict[str, int] = {"trio_relay": 0, "baseline": 0}
    busy: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for b in (TRIO_RELAY, BASELINE):
        for c in CONCURRENCY:
            rates[(b.name, c)] = []
            latencies[(b.name, c)] = []
            busy[(b.name, c)] = []
    ctx.progress.start("throughput", rounds * 2 * len(CONCURRENCY))
    with ctx.connector() as proc:
        for r in range(rounds):
            for c in CONCURRENCY:
                for backend in alternate(r):
                    rate, lat, failed, cpu = _window(ctx, backend, proc, c, warmup, seconds)
                    busy[(backend.name, c)].append(cpu)
                    rates[(backend.name, c)].append(rate)
                    latencies[(backend.name, c)] += lat
                    failures[backend.name] += failed
    ctx.progress.finish()

    result = Result("throughput", "C concurrent requesters on one connection")
    for c in CONCURRENCY:
        tr_rate, bl_rate = rates[("trio_relay", c)], rates[("baseline", c)]
        tr_lat, bl_lat = latencies[("trio_relay", c)], latencies[("baseline", c)]
        result.rows += [
            Row(
                f"C={c}: requests/s (median of rounds)",
                "req/s",
                median(tr_rate),
                median(bl_rate),
                len(tr_rate),
                len(bl_rate),
                better="higher",
            ),
            Row(
                f"C={c}: latency p50",
                "ms",
                percentile(tr_lat, 50),
                percentile(bl_lat, 50),
                len(tr_lat),
                len(bl_lat),
            ),
            Row(
                f"C={c}: latency p99",
                "ms",
                percentile(tr_lat, 99),
                percentile(bl_lat, 99),
                len(tr_lat),
                len(bl_lat),
            ),
        ]
        for i, side in enumerate(("client", "connector")):
            result.rows.append(
                Row(
                    f"C={c}: {side} process CPU busy",
                    "%",
                    100 * median([b[i] for b in busy[("trio_relay", c)]]),
                    100 * median([b[i] for b in busy[("baseline", c)]]),
                    len(tr_rate),
                    len(bl_rate),
                    better="",
                )
            )
        ratio = median(tr_rate) / median(bl_rate)
        want = TARGETS[c]
        what = "sequentially (C=1)" if c == 1 else f"at {c}-way"
        result.targets.append(
            Target(
                f"throughput >= {want:g}x the baseline {what}",
                f"{ratio:.2f}x ({median(tr_rate):,.0f} vs {median(bl_rate):,.0f} req/s)",
                ratio >= want,
                "" if ratio >= want else f"missed by {want - ratio:.2f}x",
            )
        )
    result.notes += [
        f"{rounds} round(s) of {seconds:g} s per implementation and C, after {warmup:g} s of "
        "warm-up; the connector answers every request at once (it batches replies)",
        f"failed requests: trio_relay {failures['trio_relay']}, baseline {failures['baseline']}",
    ]
    result.configs = {b.name: b.config({}) for b in (TRIO_RELAY, BASELINE)}
    result.samples = {
        "requests_per_s": {f"{n} / C={c}": v for (n, c), v in rates.items()},
        "cpu_busy_client_connector": {f"{n} / C={c}": v for (n, c), v in busy.items()},
    }
    result.cdf = {f"{n}, C={c}": thin(v) for (n, c), v in latencies.items() if c in (1, 256)}
    return result
