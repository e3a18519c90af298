"""``inflight``: K requests in flight (the connector withholds their results) when the
socket is reset; time from the reset until the last caller has its outcome, and whether
every outcome is ambiguous (each frame was written, so the connector may have acted).

Beside it, in the same run, **Trio's own floor** (:func:`trio_floor_ms`): K tasks parked
in Trio's lowest-level wait, all woken at once, until the last has run and returned —
no socket, no relay, nothing but the scheduler. Every caller of a Trio library is a
task that must be woken and run, so no Trio implementation settles K callers faster.
And the same floor **through this harness** (:func:`harness_floor_ms`): the very callers
the clients are timed with (each its own task of :meth:`Backend.gather`, a ``Reply``
each) on a "client" that only parks them: what any Trio client pays here before doing
any work of its own. The spread of each over the rounds is reported beside the clients'.
And the **Trio floor client** (:mod:`.floor_client`, the least a Trio client can do on
this wire: one reader that wakes every waiter in one loop as it sees the reset, no JSON,
no deadlines) through the same harness, rounds and connector as trio_relay: what a Trio
client that settles K callers at a reset can reach here, and so the floor a target must
stand on. Two rows say where a client's difference from the bare floor lies: its first
outcome against the floor's (the floor only wakes the K; a client also sees the reset
and settles them first), and its first-to-last against the floor's (running the K woken).
Last, the **machine's own speed** (:func:`machine_probe_ms`, a fixed loop of pure Python
timed before each bare floor): how much this machine alone varied over the same rounds,
the floor a spread target stands on.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._backends import (
    ACTION,
    BASELINE,
    REPLIES,
    TRIO_RELAY,
    Backend,
    Client,
    Control,
    Reply,
    alternate,
    recover,
    run_session,
)
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, Target, floor_share, median
from .floor_client import FLOOR_BACKEND, FLOOR_CLIENT
from .peers import PEER_BACKENDS

PEER = next(b for b in PEER_BACKENDS if b.name == "websockets.trio")
"""The peer client measured beside them (benchmarks/peers.py): a Trio user's own."""

SIZES = (10, 100, 1000, 10_000)
TARGETS_MS = {1000: 5.0, 10_000: 40.0}
"""The last outcome at most this long after the reset (issue 11), by K."""
FLOOR_RATIO = 1.1
"""The last outcome at most this many times Trio's floor (issue 24), by K as above..."""
MAX_SPREAD = 1.5
"""...and the slowest of the rounds less than this many times the fastest."""
# A link counts as healthy at once (trio_relay) / the ladder is reset by any link
# (baseline): each round's reset is then redialled at once, not on a ladder.
OVERRIDES: dict[str, dict[str, Any]] = {
    "trio_relay": {"backoff_stable_after": 0},
    "baseline": {"backoff_reset_after": 0},
}


class _Callers:
    """The K callers of one round: each makes one request and notes when it had its
    reply. The clients and the harness floor are timed through this same code."""

    def __init__(self, request: Callable[[dict[str, Any], float], Awaitable[Reply]]) -> None:
        self._request = request
        self.finished: list[float] = []
        self.ambiguous = 0

    async def call(self) -> None:
        reply = await self._request(ACTION, 30.0)
        self.finished.append(time.monotonic())
        self.ambiguous += reply.ambiguous


async def _one(backend: Backend, client: Client, ctl: Control, k: int) -> dict[str, float]:
    await ctl.call("withhold")
    base = int((await ctl.call("outbound_count"))["n"])
    callers = _Callers(client.request)

    async def killer() -> float:
        await ctl.call("wait_outbound", n=base + k)
        _collect_before_the_reset()
        return float((await ctl.call("abort"))["t"])

    results = await backend.gather([callers.call] * k + [killer])
    t_kill = results[-1]
    await ctl.call("release")  # stop withholding; the held results die with the session
    return {
        "last_ms": (max(callers.finished) - t_kill) * 1000,
        "first_ms": (min(callers.finished) - t_kill) * 1000,
        "ambiguous": callers.ambiguous,
    }


def _collect_before_the_reset() -> None:
    """A full collection just before each timed window (the reset, or the floors' wake-up
    loop), for every client and both floors alike. Setting up K requests leaves the
    collector owing a full collection of everything the K hold; left to itself it lands
    in whichever window comes next, and adds its 30-80 ms to one client's round by
    chance (run P of issue 24's fifth pass: trio_relay's first outcome at K = 10,000 was
    15-30 ms in four rounds and 60-84 ms in three). Collections the settling itself
    sets off still fall in the window."""
    gc.collect()


def _abort_succeeded(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED


def trio_floor_ms(k: int) -> tuple[float, float]:
    """Milliseconds from waking K parked Trio tasks (all at once, as a connection's end
    settles its waiters) until the last of them has run and returned, and until the
    first has (the wake-up loop itself: every one of the K is rescheduled before any
    runs)."""

    async def main() -> tuple[float, float]:
        parked: list[trio.lowlevel.Task] = []
        finished: list[float] = []

        async def caller() -> None:
            parked.append(trio.lowlevel.current_task())
            await trio.lowlevel.wait_task_rescheduled(_abort_succeeded)
            finished.append(time.monotonic())

        async with trio.open_nursery() as nursery:
            for _ in range(k):
                nursery.start_soon(caller)
            while len(parked) < k:
                await trio.sleep(0.001)
            _collect_before_the_reset()
            started = time.monotonic()
            for task in parked:
                trio.lowlevel.reschedule(task)
        return (max(finished) - started) * 1000, (min(finished) - started) * 1000

    return trio.run(main)


def harness_floor_ms(k: int) -> float:
    """Trio's floor through this harness: the clients' own callers (:class:`_Callers`,
    run by :meth:`Backend.gather`) on a client whose request only parks its task and
    returns a ``Reply`` once woken; milliseconds from waking all K at once until the
    last caller has noted its reply."""
    parked: list[trio.lowlevel.Task] = []

    async def park(action: dict[str, Any], timeout: float) -> Reply:
        parked.append(trio.lowlevel.current_task())
        await trio.lowlevel.wait_task_rescheduled(_abort_succeeded)
        return REPLIES[False, True]

    async def main() -> float:
        callers = _Callers(park)

        async def killer() -> float:
            while len(parked) < k:
                await trio.sleep(0.001)
            _collect_before_the_reset()
            started = time.monotonic()
            for task in parked:
                trio.lowlevel.reschedule(task)
            return started

        results = await TRIO_RELAY.gather([callers.call] * k + [killer])
        started: float = results[-1]
        return (max(callers.finished) - started) * 1000

    return trio.run(main)


PROBE_LOOPS = 100_000


def machine_probe_ms() -> float:
    """Milliseconds for a fixed run of pure-Python arithmetic (no I/O, no Trio, nothing
    the collector tracks): how fast this machine runs Python at that moment. Timed just
    before each bare floor, its spread over the rounds is the machine's own, which no
    client timed over the same rounds can be expected to beat (issue 24's sixth pass, on
    its 2-core VM: this loop took 3.1-6.2 ms over 30 samples, and the bare floor of
    1,000 alternated between ~4.6 and ~9.5 ms in phases of seconds)."""
    started = time.perf_counter()
    total = 0
    for i in range(PROBE_LOOPS):
        total += i
    return (time.perf_counter() - started) * 1000


def floor_verdict(ratio: float, client_ratio: float, to_client: float) -> str:
    """What a miss of "within FLOOR_RATIO of Trio's floor" is, from trio_relay's ratio to
    the bare floor, the floor client's, and trio_relay's to that client (same rounds):
    below a floor when the least a Trio client can do is over the target already and
    trio_relay is within the target of it; partly a floor when that client is over but
    trio_relay is further still; its own miss otherwise."""
    if ratio <= FLOOR_RATIO:
        return ""
    return floor_share(FLOOR_RATIO, client_ratio, to_client, FLOOR_CLIENT, "the bare floor")


def spread_verdict(client: float, floor: float, machine: float) -> str:
    """What a miss of "spread under MAX_SPREAD" is, from trio_relay's spread, the bare
    floor's and the machine probe's over the same rounds: below a floor when the
    machine's own speed, or Trio's floor, already varied that much."""
    if client < MAX_SPREAD:
        return ""
    reasons = []
    if machine >= MAX_SPREAD:
        reasons.append(f"the machine's own speed varied {machine:.2f}x")
    if floor >= MAX_SPREAD:
        reasons.append(f"Trio's bare floor varied {floor:.2f}x")
    if not reasons:
        return ""
    return "below a floor: " + " and ".join(reasons) + " over the same rounds"


def spread(samples: list[float]) -> float:
    """The slowest sample over the fastest (1.0 for a single one)."""
    return max(samples) / min(samples)


def _round(
    ctx: Context, backend: Backend, proc: ConnectorProcess, sizes: tuple[int, ...]
) -> dict[int, dict[str, float]]:
    async def body(client: Client, ctl: Control) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for k in sizes:
            before = client.connects
            out[k] = await _one(backend, client, ctl, k)
            await recover(backend, client, before)
            ctx.progress.advance()
        return out

    return run_session(backend, proc, OVERRIDES.get(backend.name, {}), body)


def run(ctx: Context) -> Result:
    rounds = ctx.count(7, 1, 1)
    samples: dict[str, dict[int, list[dict[str, float]]]] = {
        b.name: {k: [] for k in SIZES} for b in (TRIO_RELAY, BASELINE, PEER, FLOOR_BACKEND)
    }
    floors: dict[int, list[float]] = {k: [] for k in TARGETS_MS}
    floor_firsts: dict[int, list[float]] = {k: [] for k in TARGETS_MS}
    harness_floors: dict[int, list[float]] = {k: [] for k in TARGETS_MS}
    probes: dict[int, list[float]] = {k: [] for k in TARGETS_MS}
    ctx.progress.start("inflight", rounds * 4 * len(SIZES))
    with ctx.connector() as proc:
        for r in range(rounds):
            for backend in (*alternate(r), PEER, FLOOR_BACKEND):
                for k, figures in _round(ctx, backend, proc, SIZES).items():
                    samples[backend.name][k].append(figures)
            for k in TARGETS_MS:
                probes[k].append(machine_probe_ms())
                last, first = trio_floor_ms(k)
                floors[k].append(last)
                floor_firsts[k].append(first)
                harness_floors[k].append(harness_floor_ms(k))
    ctx.progress.finish()

    result = Result(
        "inflight", "K requests in flight, socket reset -> every caller has its outcome"
    )
    for k in SIZES:
        tr, bl = samples["trio_relay"][k], samples["baseline"][k]
        for key, label in (("last_ms", "last outcome"), ("first_ms", "first outcome")):
            result.rows.append(
                Row(
                    f"K={k:,}: {label}, median of rounds",
                    "ms",
                    median([s[key] for s in tr]),
                    median([s[key] for s in bl]),
                    len(tr),
                    len(bl),
                )
            )
        amb_t = sum(int(s["ambiguous"]) for s in tr)
        amb_b = sum(int(s["ambiguous"]) for s in bl)
        result.rows.append(
            Row(
                f"K={k:,}: ambiguous outcomes",
                "count",
                amb_t,
                amb_b,
                better="",
                text_trio=f"{amb_t}/{k * len(tr)}",
                text_base=f"{amb_b}/{k * len(bl)}",
            )
        )
    for other, named in ((PEER, f"the {PEER.name} peer"), (FLOOR_BACKEND, FLOOR_CLIENT)):
        for k in SIZES:
            tr, them = samples["trio_relay"][k], samples[other.name][k]
            result.rows.append(
                Row(
                    f"K={k:,}: last outcome vs {named}, median of rounds",
                    "ms",
                    median([s["last_ms"] for s in tr]),
                    median([s["last_ms"] for s in them]),
                    len(tr),
                    len(them),
                )
            )
    for k, limit in TARGETS_MS.items():
        floor = median(floors[k])
        harness_floor = median(harness_floors[k])
        client_floor = median([s["last_ms"] for s in samples[FLOOR_BACKEND.name][k]])
        result.rows.append(
            Row(
                f"K={k:,}: Trio's floor (K parked tasks woken, until the last returns)",
                "ms",
                floor,
                None,
                len(floors[k]),
                better="",
                text_base="-",
            )
        )
        result.rows.append(
            Row(
                f"K={k:,}: Trio's floor through this harness (the same callers, a client "
                "that only parks)",
                "ms",
                harness_floor,
                None,
                len(harness_floors[k]),
                better="",
                text_base="-",
            )
        )
        tr_last = [s["last_ms"] for s in samples["trio_relay"][k]]
        bl_last = [s["last_ms"] for s in samples["baseline"][k]]
        # Where the difference from the floor lies: up to the first outcome (seeing the
        # reset, settling, waking all K: the floor has only the waking), and from the
        # first to the last (running the K woken callers, in both).
        tr_first = [s["first_ms"] for s in samples["trio_relay"][k]]
        result.rows.append(
            Row(
                f"K={k:,}: first outcome vs Trio's floor's (the floor: waking all K)",
                "ms",
                median(tr_first),
                median(floor_firsts[k]),
                len(tr_first),
                len(floor_firsts[k]),
            )
        )
        result.rows.append(
            Row(
                f"K={k:,}: first to last outcome vs Trio's floor's (running the K woken)",
                "ms",
                median([s["last_ms"] - s["first_ms"] for s in samples["trio_relay"][k]]),
                median([a - b for a, b in zip(floors[k], floor_firsts[k], strict=True)]),
                len(tr_first),
                len(floors[k]),
            )
        )
        result.rows.append(
            Row(
                f"K={k:,}: spread of the rounds' last outcome (slowest / fastest)",
                "x",
                spread(tr_last),
                spread(bl_last),
                len(tr_last),
                len(bl_last),
            )
        )
        result.rows.append(
            Row(
                f"K={k:,}: spread of Trio's floor over the same rounds (bare / through "
                "the harness)",
                "x",
                spread(floors[k]),
                spread(harness_floors[k]),
                len(floors[k]),
                len(harness_floors[k]),
                better="",
            )
        )
        result.rows.append(
            Row(
                f"K={k:,}: spread of the machine's own speed over the same rounds (a fixed "
                "Python loop timed before each bare floor)",
                "x",
                spread(probes[k]),
                None,
                len(probes[k]),
                better="",
                text_base="-",
            )
        )
        last, base = median(tr_last), median(bl_last)
        result.targets.append(
            Target(
                f"{k:,} in flight settled <= {limit:g} ms after a reset",
                f"{last:.2f} ms, {last / limit:.2f}x the budget (median of "
                f"{len(tr_last)} rounds; baseline {base:.2f} ms; "
                f"Trio's own floor {floor:.2f} ms)",
                last <= limit,
                "" if last <= limit else f"missed by {last - limit:.2f} ms",
            )
        )
        ratio, client_ratio, to_client = last / floor, client_floor / floor, last / client_floor
        result.targets.append(
            Target(
                f"{k:,} in flight settled <= {FLOOR_RATIO:g}x Trio's floor",
                f"{ratio:.2f}x ({last:.2f} vs {floor:.2f} ms); {FLOOR_CLIENT} "
                f"{client_ratio:.2f}x ({client_floor:.2f} ms), trio_relay "
                f"{to_client:.2f}x that client; through the harness "
                f"{last / harness_floor:.2f}x ({harness_floor:.2f} ms), the harness floor "
                f"itself {harness_floor / floor:.2f}x the bare one",
                ratio <= FLOOR_RATIO,
                floor_verdict(ratio, client_ratio, to_client),
            )
        )
        tr_spread, floor_spread = spread(tr_last), spread(floors[k])
        client_spread = spread([s["last_ms"] for s in samples[FLOOR_BACKEND.name][k]])
        machine_spread = spread(probes[k])
        result.targets.append(
            Target(
                f"{k:,} in flight: spread of the rounds < {MAX_SPREAD:g}x",
                f"{tr_spread:.2f}x over {len(tr_last)} rounds; Trio's floor "
                f"{floor_spread:.2f}x bare, {spread(harness_floors[k]):.2f}x through the "
                f"harness, {FLOOR_CLIENT} {client_spread:.2f}x, the machine itself (a "
                f"fixed Python loop) {machine_spread:.2f}x, over the same rounds",
                tr_spread < MAX_SPREAD,
                spread_verdict(tr_spread, floor_spread, machine_spread),
            )
        )
    all_ambiguous = all(int(s["ambiguous"]) == k for k in SIZES for s in samples["trio_relay"][k])
    result.targets.append(
        Target("every in-flight outcome ambiguous", "yes" if all_ambiguous else "NO", all_ambiguous)
    )
    result.notes += [
        "each round: results withheld, K requests issued, the reset comes once the connector "
        "has read all K; timed from the reset (connector clock) to each caller's return; "
        "a full gc.collect() just before each reset and each floor's wake-up, untimed",
        "Trio's floor: K tasks parked in trio.lowlevel.wait_task_rescheduled, rescheduled "
        "at once, until the last has appended its time and returned (no socket, no relay); "
        "one sample per round, median",
        "Trio's floor through this harness: the clients' own callers (one task each, "
        "started by the same gather, a Reply each) on a client whose request only parks "
        "until all K are woken at once; one sample per round, median",
        "spread: the slowest round over the fastest, for the clients and for both floors "
        "(measured between the same rounds)",
        f"the machine's own speed: {PROBE_LOOPS:,} loops of integer addition in pure "
        "Python, timed just before each bare floor; its spread is how much this machine's "
        "speed alone varied over the rounds",
        f"rows 'vs {FLOOR_CLIENT}': benchmarks/floor_client.py (one "
        "reader; at the reset every waiter rescheduled in one loop; no JSON, no deadlines) "
        "in the baseline column, same rounds, same harness; ratio = trio_relay / it",
        f"rows 'vs the {PEER.name} peer': that peer client (benchmarks/peers.py, one reader "
        "task; its waiters all set in one loop once its session has ended) in the "
        "baseline column, same rounds; ratio = trio_relay / peer",
    ]
    result.configs = {
        b.name: b.config(OVERRIDES.get(b.name, {}))
        for b in (TRIO_RELAY, BASELINE, PEER, FLOOR_BACKEND)
    }
    result.samples = {name: {str(k): v for k, v in d.items()} for name, d in samples.items()}
    return result
