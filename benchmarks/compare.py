"""``compare`` (the default ``trio-relay bench``): trio_relay beside what a Trio user would
otherwise run, on the figures that decide it.

The clients:

- **asyncio design**: the asyncio client this library replaces (``baseline.py``), with
  its own policy (a redial waits 0.5-1 s) or with the same zero backoff as the others;
- **websockets.trio** and **wsproto**: the minimal Trio clients a user would write
  instead (``peers.py``): one reader task, a frame written per request, a redial loop
  with no backoff and nothing else (no keepalive of their own, no backlog, no dedupe).

The figures:

- **redial**: from the drop at the connector (a TCP reset, a 1011 or a 1001 close, a
  silent peer that then closes: in turn) to the first successful request on the new
  connection. Once with every client's default policy, once with zero backoff for all
  (the mechanism alone). Rounds interleave the clients, each runs early and late.
- **CPU per request** at 1, 16 and 256 requests in flight on one connection, against a
  connector that only answers (``fast_connector.py``): the client process's CPU time
  over a window, divided by the requests it completed; median of rounds.

Wall-clock figures move with the machine (on a 2-core VM a fixed Python loop varies
1.6-2.3x within a run), so this run reports them only as ratios of one run; ``bench
cost`` counts instructions instead, which repeat.
"""

from __future__ import annotations

from ._backends import BASELINE, TRIO_RELAY, Backend
from ._context import Context
from ._report import Plot, Result, Table, fmt, fmt_ratio, median, percentile, thin
from .peers import PEER_BACKENDS
from .redial import KINDS, POLICIES, ZERO, split_evenly, timed_drops
from .throughput import CASES, Window, timed_window

__all__ = ["CLIENTS", "SHOWN", "run"]

CLIENTS: tuple[Backend, ...] = (TRIO_RELAY, BASELINE, *PEER_BACKENDS)
SHOWN = {TRIO_RELAY.name: "trio_relay", BASELINE.name: "asyncio design",
         **{p.name: p.name for p in PEER_BACKENDS}}  # fmt: skip
OTHERS = CLIENTS[1:]
DEFAULT = "default"
REQUEST_CASES = tuple(case for case in CASES if not case.content)
"""Sequential, 16-way and 256-way, the small action (no 10 KiB case here)."""


def _rotation(round_index: int) -> list[Backend]:
    """Every client first, second, third and fourth equally often over four rounds."""
    shift = round_index % len(CLIENTS)
    return [*CLIENTS[shift:], *CLIENTS[:shift]]


def run(ctx: Context) -> Result:
    zero_drops = ctx.count(80, 20, 4)
    default_drops = ctx.pick(20, 8, 2)
    baseline_default_drops = ctx.pick(10, 4, 2)  # each waits 0.5-1 s by its policy
    redial_rounds = ctx.pick(8, 4, 1)
    cpu_rounds = ctx.pick(4, 2, 1)
    seconds, warmup = ctx.pick(1.0, 0.5, 0.2), ctx.pick(0.2, 0.1, 0.05)

    zero: dict[str, list[float]] = {c.name: [] for c in CLIENTS}
    defaults: dict[str, list[float]] = {c.name: [] for c in CLIENTS}
    windows: dict[tuple[str, str], list[Window]] = {
        (c.name, case.label): [] for c in CLIENTS for case in REQUEST_CASES
    }

    def drops(backend: Backend, policy: str, count: int, into: list[float]) -> None:
        kinds = [KINDS[(len(into) + i) % len(KINDS)] for i in range(count)]
        if kinds:
            into += [ms for _, ms in timed_drops(ctx, backend, policy, proc, kinds)]

    with ctx.connector() as proc:
        ctx.progress.start("redial, zero backoff for all", zero_drops * len(CLIENTS))
        for r, share in enumerate(split_evenly(zero_drops, redial_rounds)):
            for backend in _rotation(r):
                drops(backend, ZERO, share, zero[backend.name])
        # Each client's own policy: the peers have none (they redial at once), so their
        # zero-backoff drops stand for both; the asyncio design's wait is 0.5-1 s a drop.
        ctx.progress.start("redial, trio_relay's default policy", default_drops)
        drops(TRIO_RELAY, DEFAULT, default_drops, defaults[TRIO_RELAY.name])
        ctx.progress.start("redial, the asyncio design's policy", baseline_default_drops)
        drops(BASELINE, DEFAULT, baseline_default_drops, defaults[BASELINE.name])
    for peer in PEER_BACKENDS:
        defaults[peer.name] = zero[peer.name]

    ctx.progress.start(
        "CPU per request at 1, 16, 256 in flight", cpu_rounds * len(CLIENTS) * len(REQUEST_CASES)
    )
    with ctx.connector(fast=True) as proc:
        for r in range(cpu_rounds):
            for case in REQUEST_CASES:
                for backend in _rotation(r + 1):
                    windows[(backend.name, case.label)].append(
                        timed_window(ctx, backend, proc, case, warmup, seconds)
                    )
    ctx.progress.finish()
    return _result(zero, defaults, windows, cpu_rounds, seconds)


def _result(
    zero: dict[str, list[float]],
    defaults: dict[str, list[float]],
    windows: dict[tuple[str, str], list[Window]],
    cpu_rounds: int,
    seconds: float,
) -> Result:
    result = Result("compare", "trio_relay beside the asyncio design and minimal Trio clients")
    cpu = {
        key: median([w.cpu_us for w in ws]) for key, ws in windows.items()
    }  # µs per request
    rate = {key: float(round(median([w.rate for w in ws]))) for key, ws in windows.items()}

    def cells(figures: dict[str, float], unit: str) -> list[str]:
        ours = figures[TRIO_RELAY.name]
        row = [fmt(ours, unit)]
        for other in OTHERS:
            theirs = figures[other.name]
            ratio = ours / theirs if theirs else None
            row.append(f"{fmt(theirs, unit)} ({_times(ratio)})")
        return row

    p50 = {name: percentile(v, 50) for name, v in defaults.items()}
    p50_zero = {name: percentile(v, 50) for name, v in zero.items()}
    p99_zero = {name: percentile(v, 99) for name, v in zero.items()}
    summary = [
        ["redial p50, own policy", *cells(p50, "ms")],
        ["redial p50, zero backoff", *cells(p50_zero, "ms")],
        ["redial p99, zero backoff", *cells(p99_zero, "ms")],
    ]
    for case in REQUEST_CASES:
        summary.append(
            [f"CPU/request, {case.concurrency} in flight",
             *cells({c.name: cpu[(c.name, case.label)] for c in CLIENTS}, "µs")]
        )  # fmt: skip
    big = REQUEST_CASES[-1]
    summary.append(
        [f"requests/s, {big.concurrency} in flight ^",
         *cells({c.name: rate[(c.name, big.label)] for c in CLIENTS}, "")]
    )  # fmt: skip
    result.tables.append(
        Table(
            "trio_relay beside what you would otherwise run (lower is better; ^ higher is)",
            ["", "trio_relay", *(SHOWN[c.name] for c in OTHERS)],
            summary,
            [
                "In brackets: trio_relay's figure as a multiple of that client's (0.50x: "
                "half of it). asyncio design: the asyncio client trio_relay replaces; "
                "websockets.trio, wsproto: the minimal Trio clients you would write "
                "instead (a reader task, a frame per request, redial at once; no "
                "keepalive, backlog or dedupe of their own). These two have no backoff, "
                "so their own policy is zero backoff.",
                _meaning(p50, p50_zero, cpu, big.label, big.concurrency),
            ],
        )
    )
    # Details: the redial's spread and the throughput beside the CPU.
    detail = []
    for name, series in (("own policy", defaults), ("zero backoff", zero)):
        for q in (90, 99) if name == "own policy" else (90,):
            detail.append(
                [f"redial p{q}, {name}",
                 *cells({n: percentile(v, q) for n, v in series.items()}, "ms")]
            )  # fmt: skip
    for case in REQUEST_CASES[:-1]:
        detail.append(
            [f"requests/s, {case.concurrency} in flight ^",
             *cells({c.name: rate[(c.name, case.label)] for c in CLIENTS}, "")]
        )  # fmt: skip
    for case in REQUEST_CASES:
        detail.append(
            [f"latency p50, {case.concurrency} in flight",
             *cells({c.name: median([x for w in windows[(c.name, case.label)]
                                     for x in w.latencies]) for c in CLIENTS}, "ms")]
        )  # fmt: skip
    counts = (
        f"{len(zero[TRIO_RELAY.name])} zero-backoff drops per client; own policy: "
        f"{len(defaults[TRIO_RELAY.name])} for trio_relay, {len(defaults[BASELINE.name])} for "
        "the asyncio design (each waits 0.5-1 s by its policy)"
    )
    result.tables.append(
        Table(
            "Details",
            ["", "trio_relay", *(SHOWN[c.name] for c in OTHERS)],
            detail,
            [
                f"Redial: {counts}; a drop is a TCP reset, a 1011 close, a 1001 close or a "
                "peer silent for 20 ms then closing, in turn, timed at the connector from "
                "the drop to the first successful request.",
                f"CPU per request: the client process's CPU time over a {seconds:g} s window "
                f"divided by the requests completed in it, median of {cpu_rounds} rounds; "
                "the connector (a process of its own) only answers.",
                "Wall-clock figures move with the machine; compare the ratios within one "
                "run. `trio-relay bench cost` counts instructions instead, which repeat.",
            ],
        )
    )
    result.cdf = {
        f"{SHOWN[name]}, {label}": thin(series[name])
        for label, series in (("zero backoff", zero),)
        for name in series
    }
    for client in (TRIO_RELAY, BASELINE):
        result.cdf[f"{SHOWN[client.name]}, own policy"] = thin(defaults[client.name])
    result.plots.append(
        Plot(
            "cpu-per-request",
            "Client CPU per request by requests in flight (lower is better)",
            "requests in flight (log scale)",
            "client CPU per request (µs)",
            {
                SHOWN[c.name]: [
                    (float(case.concurrency), cpu[(c.name, case.label)]) for case in REQUEST_CASES
                ]
                for c in CLIENTS
            },
            xlog=True,
        )
    )
    result.samples = {
        "redial_ms": {"zero backoff": zero, "own policy": defaults},
        "client_cpu_us_per_request": {
            f"{n} / {c}": [w.cpu_us for w in ws] for (n, c), ws in windows.items()
        },
        "requests_per_s": {f"{n} / {c}": [w.rate for w in ws] for (n, c), ws in windows.items()},
    }
    result.configs = {
        **{f"{c.name}, zero backoff": c.config(POLICIES[ZERO].get(c.name, {})) for c in CLIENTS},
        **{f"{c.name}, own policy": c.config(POLICIES[DEFAULT].get(c.name, {}))
           for c in CLIENTS[:2]},
    }  # fmt: skip
    return result


def _times(ratio: float | None) -> str:
    """A ratio short enough for a 100-column table."""
    if ratio is not None and 0 < ratio < 0.01:
        return "<0.01x"
    return fmt_ratio(ratio)


def _meaning(
    p50: dict[str, float],
    p50_zero: dict[str, float],
    cpu: dict[tuple[str, str], float],
    big: str,
    concurrency: int,
) -> str:
    """The summary in a sentence or two, from the figures."""
    ours = p50[TRIO_RELAY.name]
    base = p50[BASELINE.name]
    peers_zero = [p50_zero[p.name] for p in PEER_BACKENDS]
    ours_cpu = cpu[(TRIO_RELAY.name, big)]
    best_peer_cpu = min(cpu[(p.name, big)] for p in PEER_BACKENDS)
    return (
        f"What it means: after a drop trio_relay is serving again in {fmt(ours, 'ms')} "
        f"where the asyncio design takes {fmt(base, 'ms')} (its backoff); with the same "
        f"zero backoff it is {fmt_ratio(p50_zero[TRIO_RELAY.name] / p50_zero[BASELINE.name])} "
        f"the asyncio design and {fmt_ratio(p50_zero[TRIO_RELAY.name] / min(peers_zero))} "
        f"the faster minimal Trio client. At {concurrency} in flight it spends "
        f"{fmt_ratio(ours_cpu / cpu[(BASELINE.name, big)])} the asyncio design's CPU per "
        f"request and {fmt_ratio(ours_cpu / best_peer_cpu)} the thriftier minimal client's."
    )
