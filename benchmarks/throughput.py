"""``throughput``: C concurrent requesters sharing one connection, against a connector
that is never the bottleneck (:mod:`.fast_connector`: asyncio on uvloop, batched
replies): completed requests per second and, beside it, the **client's CPU time per
request** (``time.process_time()`` of this process over the measured window, divided by
the requests completed in it).

Cases: sequential (C = 1), 16-way, 256-way with a small ``typing`` action, and 16-way
with 10 KiB of content per request. Each round warms the connection up, then every
requester loops request -> result until the window closes. Rounds alternate the
implementations.

Beside the asyncio baseline, the same windows run the **peer clients** of
:mod:`.peers` (what a Trio user would write instead: ~150 lines on ``websockets.trio``
or on ``wsproto``, one reader task, each request writing its own frame). Their rows put
the peer in the baseline column, so the ratio is trio_relay / that peer.

Last in each round runs the **Trio floor** (:mod:`.floor_client`): trio_relay's shape
with no protocol work at all (no JSON, no validation, no deadlines), the least any Trio
client can spend per request on this wire. It has no target of its own; its rows say
how far trio_relay is above it, and each CPU target says whether the target itself lies
above the floor (reachable by a Trio client) or below it.

The CPU figure is the one the targets are about: on a shared machine req/s moves with
whatever else runs, CPU per request much less. Beside it, the garbage collector's runs
per 1,000 requests (counted with ``gc.callbacks`` over the same window): a client that
keeps more tracked objects per request in flight than CPython's young threshold allows
pays for collections that find nothing (docs/deployment.md, "The garbage collector at
hundreds of requests in flight").
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

from ._backends import ACTION, BASELINE, TRIO_RELAY, Backend, Client, Control, alternate
from ._backends import run_session as session
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, Target, median, percentile, thin
from .floor_client import FLOOR_BACKEND
from .peers import PEER_BACKENDS

__all__ = ["CASES", "Case", "Window", "run", "timed_window"]

BIG_CONTENT = 10 * 1024


@dataclass(frozen=True)
class Case:
    label: str
    concurrency: int
    content: int
    """Bytes of content per request (0: the small ``typing`` action)."""
    cpu_target: float | None = None
    """Client CPU per request, trio_relay / baseline, at most this (issue 11)."""
    rate_target: float | None = None
    """Requests per second, trio_relay / baseline, at least this (issue 11)."""

    @property
    def action(self) -> dict[str, Any]:
        if not self.content:
            return ACTION
        return {"op": "send", "chat_id": "bench", "content": "x" * self.content}


CASES = (
    Case("sequential", 1, 0, cpu_target=0.8),
    Case("16-way", 16, 0, cpu_target=0.40),
    Case("256-way", 256, 0, cpu_target=0.33),
    Case("10 KiB, 16-way", 16, BIG_CONTENT, rate_target=1.0),
)


@dataclass
class Window:
    rate: float
    """Completed requests per second."""
    cpu_us: float
    """Client process CPU µs per completed request."""
    latencies: list[float]
    """Milliseconds, one per completed request."""
    failures: int
    busy: tuple[float, float]
    """CPU share (0..1) of the client and of the connector process."""
    collections: int = 0
    """Garbage-collector runs (any generation) in this process during the window."""


def timed_window(
    ctx: Context,
    backend: Backend,
    proc: ConnectorProcess,
    case: Case,
    warmup: float,
    seconds: float,
) -> Window:
    action = case.action

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
                reply = await client.request(action, 30.0)
                if measuring:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    failures += not reply.success

        await backend.gather([requester] * case.concurrency)  # warm-up
        measuring = True
        server_cpu = float((await ctl.call("cpu"))["cpu"])
        collections = 0

        def count_collection(phase: str, info: dict[str, int]) -> None:
            nonlocal collections
            collections += phase == "stop"

        gc.callbacks.append(count_collection)
        try:
            client_cpu = time.process_time()
            started = time.perf_counter()
            stop_at = started + seconds
            await backend.gather([requester] * case.concurrency)
            elapsed = time.perf_counter() - started
            client_cpu = time.process_time() - client_cpu
        finally:
            gc.callbacks.remove(count_collection)
        server_cpu = float((await ctl.call("cpu"))["cpu"]) - server_cpu
        ctx.progress.advance()
        done = max(len(latencies), 1)
        return Window(
            rate=len(latencies) / elapsed,
            cpu_us=client_cpu / done * 1e6,
            latencies=latencies,
            failures=failures,
            busy=(client_cpu / elapsed, server_cpu / elapsed),
            collections=collections,
        )

    return session(backend, proc, {}, body)


Key = tuple[str, str]
"""(implementation, case label)."""


PEER_CPU_TARGET = 1.0
"""Client CPU per request, trio_relay / each peer, at most this (issue 24)."""


def _order(round_index: int) -> list[Backend]:
    """trio_relay and the baseline alternating as everywhere, the peers and the floor
    after them in alternating order too: each implementation runs early in some rounds,
    late in others."""
    others: list[Backend] = [*PEER_BACKENDS, FLOOR_BACKEND]
    return [*alternate(round_index), *(others if round_index % 2 == 0 else others[::-1])]


def run(ctx: Context) -> Result:
    rounds = ctx.count(5, 1, 1)
    seconds = ctx.pick(1.0, 0.5, 0.2)
    warmup = ctx.pick(0.2, 0.1, 0.05)
    backends: list[Backend] = [TRIO_RELAY, BASELINE, *PEER_BACKENDS, FLOOR_BACKEND]
    windows: dict[Key, list[Window]] = {(b.name, c.label): [] for b in backends for c in CASES}
    ctx.progress.start("throughput", rounds * len(backends) * len(CASES))
    with ctx.connector(fast=True) as proc:
        connector_loop = proc.loop
        for r in range(rounds):
            for case in CASES:
                for backend in _order(r):
                    windows[(backend.name, case.label)].append(
                        timed_window(ctx, backend, proc, case, warmup, seconds)
                    )
    ctx.progress.finish()
    result = Result("throughput", "C concurrent requesters on one connection, fast connector")
    for case in CASES:
        _rows(
            result, case, windows[("trio_relay", case.label)], windows[("baseline", case.label)],
            windows[(FLOOR_BACKEND.name, case.label)],
        )  # fmt: skip
    for case in CASES:
        for peer in PEER_BACKENDS:
            _peer_rows(
                result, case, peer.name, windows[("trio_relay", case.label)],
                windows[(peer.name, case.label)],
            )  # fmt: skip
    for case in CASES:
        _floor_rows(
            result, case, windows[("trio_relay", case.label)],
            windows[(FLOOR_BACKEND.name, case.label)],
        )  # fmt: skip
    failures = {
        b.name: sum(w.failures for (n, _), ws in windows.items() if n == b.name for w in ws)
        for b in backends
    }
    result.notes += [
        f"{rounds} round(s) of {seconds:g} s per implementation and case, after {warmup:g} s "
        f"of warm-up; the connector is benchmarks/fast_connector.py on {connector_loop} in a "
        "process of its own (batched replies: one message answers every request read at once)",
        "client CPU = time.process_time() of the client process over the window / requests "
        "completed in it (the harness's own loop is paid alike by both); median of rounds",
        "garbage-collector runs: gc.callbacks in this process over the window, any "
        "generation, per 1,000 requests completed; median of rounds",
        "failed requests: " + ", ".join(f"{name} {n}" for name, n in failures.items()),
        "rows '... vs PEER': the baseline column holds that peer client's figure "
        "(benchmarks/peers.py), so the ratio is trio_relay / peer; same windows, same "
        "connector, rounds interleaved with trio_relay's and the baseline's",
        f"rows '... vs the {FLOOR_BACKEND.name}': the baseline column holds the floor "
        "(benchmarks/floor_client.py: trio_relay's reader/writer shape with no JSON, no "
        "validation, no deadlines), the least a Trio client spends per request here; a "
        "bound, not a rival, so it has no target",
    ]
    result.configs = {b.name: b.config({}) for b in backends}
    result.samples = {
        "requests_per_s": {f"{n} / {c}": [w.rate for w in v] for (n, c), v in windows.items()},
        "client_cpu_us_per_request": {
            f"{n} / {c}": [w.cpu_us for w in v] for (n, c), v in windows.items()
        },
        "cpu_busy_client_connector": {
            f"{n} / {c}": [w.busy for w in v] for (n, c), v in windows.items()
        },
        "gc_collections": {
            f"{n} / {c}": [w.collections for w in v] for (n, c), v in windows.items()
        },
    }
    result.cdf = {
        f"{n}, {c}": thin([x for w in v for x in w.latencies])
        for (n, c), v in windows.items()
        if c in ("sequential", "256-way")
    }
    return result


def _rows(
    result: Result, case: Case, tr: list[Window], bl: list[Window], floor: list[Window]
) -> None:
    n_t, n_b = len(tr), len(bl)
    rate_t, rate_b = median([w.rate for w in tr]), median([w.rate for w in bl])
    cpu_t, cpu_b = median([w.cpu_us for w in tr]), median([w.cpu_us for w in bl])
    lat_t = [x for w in tr for x in w.latencies]
    lat_b = [x for w in bl for x in w.latencies]
    label = case.label
    result.rows += [
        Row(f"{label}: requests/s", "req/s", rate_t, rate_b, n_t, n_b, better="higher"),
        Row(f"{label}: client CPU per request", "µs", cpu_t, cpu_b, n_t, n_b),
        Row(f"{label}: latency p50", "ms", percentile(lat_t, 50), percentile(lat_b, 50),
            len(lat_t), len(lat_b)),
        Row(f"{label}: latency p99", "ms", percentile(lat_t, 99), percentile(lat_b, 99),
            len(lat_t), len(lat_b)),
    ]
    result.rows.append(
        Row(
            f"{label}: garbage-collector runs per 1,000 requests",
            "",
            _collections_per_1000(tr),
            _collections_per_1000(bl),
            n_t,
            n_b,
        )
    )
    for i, side in enumerate(("client", "connector")):
        result.rows.append(
            Row(
                f"{label}: {side} process CPU busy",
                "%",
                100 * median([w.busy[i] for w in tr]),
                100 * median([w.busy[i] for w in bl]),
                n_t,
                n_b,
                better="",
            )
        )
    if case.cpu_target is not None:
        target = _ratio_target(
            f"client CPU per request <= {case.cpu_target:g}x the baseline's, {label}",
            cpu_t / cpu_b,
            case.cpu_target,
            f"{cpu_t:.1f} vs {cpu_b:.1f} µs; {rate_t:,.0f} vs {rate_b:,.0f} req/s",
            at_most=True,
        )
        if not target.met:
            target.note += "; " + _floor_verdict(
                median([w.cpu_us for w in floor]), cpu_b, case.cpu_target
            )
        result.targets.append(target)
    if case.rate_target is not None:
        result.targets.append(
            _ratio_target(
                f"throughput >= {case.rate_target:g}x the baseline's, {label}",
                rate_t / rate_b,
                case.rate_target,
                f"{rate_t:,.0f} vs {rate_b:,.0f} req/s; CPU {cpu_t:.1f} vs {cpu_b:.1f} µs "
                "per request",
                at_most=False,
            )
        )


def _peer_rows(
    result: Result, case: Case, peer: str, tr: list[Window], pe: list[Window]
) -> None:
    cpu_t, cpu_p = median([w.cpu_us for w in tr]), median([w.cpu_us for w in pe])
    rate_t, rate_p = median([w.rate for w in tr]), median([w.rate for w in pe])
    label = f"{case.label}: client CPU per request vs {peer}"
    result.rows += [
        Row(f"{case.label}: requests/s vs {peer}", "req/s", rate_t, rate_p, len(tr), len(pe),
            better="higher"),
        Row(label, "µs", cpu_t, cpu_p, len(tr), len(pe)),
    ]  # fmt: skip
    if case.cpu_target is not None:
        result.targets.append(
            _ratio_target(
                f"client CPU per request <= {PEER_CPU_TARGET:g}x the {peer} peer's, "
                f"{case.label}",
                cpu_t / cpu_p,
                PEER_CPU_TARGET,
                f"{cpu_t:.1f} vs {cpu_p:.1f} µs",
                at_most=True,
            )
        )


def _floor_verdict(cpu_floor: float, cpu_base: float, want: float) -> str:
    """Whether a missed CPU target lies below what any Trio client can reach here."""
    ratio = cpu_floor / cpu_base
    where = "below the floor: no Trio client can meet it" if ratio > want else (
        "above the floor, so the floor does not explain the miss"
    )
    return f"the {FLOOR_BACKEND.name} is {ratio:.2f}x the baseline ({cpu_floor:.1f} µs): {where}"


def _floor_rows(result: Result, case: Case, tr: list[Window], floor: list[Window]) -> None:
    cpu_t, cpu_f = median([w.cpu_us for w in tr]), median([w.cpu_us for w in floor])
    rate_t, rate_f = median([w.rate for w in tr]), median([w.rate for w in floor])
    name = FLOOR_BACKEND.name
    result.rows += [
        Row(f"{case.label}: requests/s vs the {name}", "req/s", rate_t, rate_f, len(tr),
            len(floor), better="higher"),
        Row(f"{case.label}: client CPU per request vs the {name}", "µs", cpu_t, cpu_f, len(tr),
            len(floor)),
        Row(f"{case.label}: garbage-collector runs per 1,000 requests vs the {name}", "",
            _collections_per_1000(tr), _collections_per_1000(floor), len(tr), len(floor)),
    ]  # fmt: skip


def _collections_per_1000(windows: list[Window]) -> float:
    return median([1000 * w.collections / max(len(w.latencies), 1) for w in windows])


def _ratio_target(text: str, ratio: float, want: float, figures: str, *, at_most: bool) -> Target:
    met = ratio <= want if at_most else ratio >= want
    return Target(
        text,
        f"{ratio:.2f}x ({figures})",
        met,
        "" if met else f"missed by {abs(ratio - want):.2f}x",
    )
