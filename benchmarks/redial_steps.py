"""``redial_steps``: where a redial's time goes, step by step, trio_relay against the
asyncio baseline, both with zero backoff (issue 24: head to head, the baseline redials
faster).

Each drop is a TCP reset from the connector. The time from the reset to the first
successful probe is cut at marks taken from outside the relay:

- the connector's own clock (one ``CLOCK_MONOTONIC`` for every process on Linux): the
  reset, the upgrade it accepted, the ``hello`` it read, the ``descriptor`` it wrote,
  the probe's ``outbound`` it read (its ``trace`` / ``timeline`` commands, observers of
  the reference connector);
- trio_relay: a :class:`trio.abc.Instrument` (Trio's public scheduler hooks) that keeps
  every task step (start, end, task name) and every wait for I/O, and looks at the
  public ``relay.state`` after each step: the step that moved it off ``CONNECTED`` is
  where the drop was seen, the one that moved it back is "connected"; and a dialer
  (``RelayConfig(dialer=...)``) that notes its call and return around the real one and
  hands back the real one's stream untouched (so no fast path is lost);
- the baseline: its ``trace`` hook (the reader saw the end; a dial starts; ``connect``
  returned; connected).

Beside the instrumented rounds, the same drops without any instrument or trace (the
totals the hooks cost), and the two peer clients of :mod:`.peers` (what a Trio user
would write; no backoff either): the floor a Trio client reaches on this machine.
"""

from __future__ import annotations

import gc
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

import trio_relay
from trio_relay._trio.link.dial import TcpDialer

from ._backends import (
    BASELINE,
    TRIO_RELAY,
    Backend,
    Client,
    Control,
    _BaselineClient,
    _TrioClient,
    recover,
    relay_config,
)
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, percentile
from .baseline import BaselineConfig, BaselineRelay
from .peers import PEER_BACKENDS, open_peer
from .redial import POLICIES

__all__ = ["run"]

POLICY = POLICIES["zero backoff"]

Marks = dict[str, float]


@dataclass(eq=False)  # hashable: Trio keeps its instruments in a set
class _Spy(trio.abc.Instrument):
    """Trio's scheduler hooks, recording only while armed."""

    relay: trio_relay.Relay | None = None
    armed: bool = False
    steps: list[tuple[float, float, str, float]] = field(default_factory=list)
    """(start, end, task name, thread CPU at the start or NaN) of each task step. The
    CPU clock is a system call here (about 2 µs), so it is read only where a figure
    needs it: at the start of a reader step and after a step that changed the state."""
    io_waits: list[float] = field(default_factory=list)
    """The end of each wait for I/O (one per run-loop turn)."""
    changes: list[tuple[float, str, trio_relay.State, float]] = field(default_factory=list)
    _started: float = 0.0
    _cpu: float = 0.0
    _state: trio_relay.State | None = None

    def arm(self) -> None:
        self.steps, self.io_waits, self.changes = [], [], []
        self._state = self.relay.state if self.relay is not None else None
        self.armed = True

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.armed:
            self._started = time.monotonic()
            self._cpu = time.thread_time() if task.name.endswith("._reader") else math.nan

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.armed:
            return
        now = time.monotonic()
        self.steps.append((self._started, now, task.name, self._cpu))
        if self.relay is not None:
            state = self.relay.state
            if state is not self._state:
                self._state = state
                self.changes.append((now, task.name, state, time.thread_time()))

    def after_io_wait(self, timeout: float) -> None:
        if self.armed:
            self.io_waits.append(time.monotonic())


class _GcClock:
    """Python's own collector hooks (``gc.callbacks``): the span of every cyclic
    collection, by generation, while armed; the same for both clients."""

    def __init__(self) -> None:
        self.armed = False
        self.spans: list[tuple[float, float, int]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.armed:
            return
        if phase == "start":
            self._started = time.monotonic()
        else:
            self.spans.append((self._started, time.monotonic(), info["generation"]))

    def between(self, a: float, b: float) -> tuple[float, int]:
        """Milliseconds of collection inside [a, b], and the oldest generation run."""
        spans = [(t0, t1, g) for t0, t1, g in self.spans if t0 >= a and t1 <= b]
        return sum(t1 - t0 for t0, t1, _ in spans) * 1000, max((g for *_, g in spans), default=-1)

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def _short(name: str) -> str:
    """A task name without its package path (trio_relay's names are module paths)."""
    return ".".join(name.rsplit(".", 2)[-2:])


@dataclass
class Drop:
    marks: Marks
    gc_ms: float = 0.0
    """Cyclic garbage collection between the reset and the probe's success."""
    gc_generation: int = -1
    """The oldest generation collected in that time (-1: none ran)."""
    between: tuple[str, ...] = ()
    """trio_relay: the task steps from the one that saw the drop to the dial."""
    turns: int = 0
    """trio_relay: run-loop turns (waits for I/O) in that stretch."""


def _connector_marks(events: list[list[Any]], marks: Marks) -> None:
    for t, _index, what in events:
        key = {
            "session open": "open",
            "in hello": "hello",
            "out descriptor": "descriptor",
            "in outbound": "probe_in",
        }.get(what)
        if key is not None and key not in marks:
            marks[key] = float(t)


async def _drop(
    backend: Backend, client: Client, ctl: Control, marks: Marks, gcs: _GcClock | None = None
) -> None:
    before = client.connects
    if gcs is not None:
        gcs.spans.clear()
        gcs.armed = True
    marks["kill"] = float((await ctl.call("abort"))["t"])
    marks["ok"] = await recover(backend, client, before)
    marks["cpu:ok"] = time.thread_time()
    if gcs is not None:
        gcs.armed = False
        marks["gc_ms"], generation = gcs.between(marks["kill"], marks["ok"])
        marks["gc_generation"] = float(generation)
    events = (await ctl.call("timeline", since=marks["kill"]))["events"]
    _connector_marks(events, marks)


def _trio_relay_drops(
    ctx: Context, proc: ConnectorProcess, n: int, instrument: bool
) -> list[Drop]:
    spy = _Spy()
    marks: Marks = {}

    overrides = dict(POLICY["trio_relay"])
    # The real dialer, built from the relay's own settings, timed from outside.
    real_dial = TcpDialer.from_config(relay_config(overrides))

    async def dialer(endpoint: Any) -> Any:
        if spy.armed and "dial" not in marks:
            marks["dial"], marks["cpu:dial"] = time.monotonic(), time.thread_time()
        stream = await real_dial(endpoint)
        if spy.armed and "tcp" not in marks:
            marks["tcp"], marks["cpu:tcp"] = time.monotonic(), time.thread_time()
        return stream

    if instrument:
        overrides["dialer"] = dialer
    config = relay_config(overrides)

    async def main() -> list[Drop]:
        out: list[Drop] = []
        async with (
            TRIO_RELAY.control(proc.control_path) as ctl,
            trio_relay.open_relay(proc.url, config=config) as relay,
        ):
            client = _TrioClient(relay)
            await client.wait_connected(15)
            await ctl.call("trace", on=True)
            if instrument:
                spy.relay = relay
                trio.lowlevel.add_instrument(spy)
            for _ in range(n):
                marks.clear()
                if instrument:
                    spy.arm()
                with _GcClock() as gcs:
                    await _drop(TRIO_RELAY, client, ctl, marks, gcs if instrument else None)
                spy.armed = False
                out.append(_trio_drop(spy, dict(marks)) if instrument else Drop(dict(marks)))
                ctx.progress.advance()
            if instrument:
                trio.lowlevel.remove_instrument(spy)
            await ctl.call("trace", on=False)
        return out

    return trio.run(main)


def _trio_drop(spy: _Spy, marks: Marks) -> Drop:
    seen = next((c for c in spy.changes if c[2] is not trio_relay.State.CONNECTED), None)
    up = next((c for c in spy.changes if c[2] is trio_relay.State.CONNECTED), None)
    if seen is None or up is None or "dial" not in marks:
        return Drop(marks)
    marks["seen"], marks["cpu:seen"] = seen[0], seen[3]
    marks["connected"], marks["cpu:connected"] = up[0], up[3]
    # The step that saw the drop began when its task was woken: the reset's arrival.
    for t0, t1, _name, c0 in spy.steps:
        if t1 == seen[0]:
            marks["woken"] = t0
            if not math.isnan(c0):
                marks["cpu:woken"] = c0
            break
    between = tuple(
        _short(name) for t0, t1, name, *_ in spy.steps if seen[0] <= t1 and t0 <= marks["dial"]
    )
    turns = sum(1 for t in spy.io_waits if seen[0] <= t <= marks["dial"])
    return Drop(marks, between=between, turns=turns)


def _baseline_drops(
    ctx: Context, proc: ConnectorProcess, n: int, instrument: bool
) -> list[Drop]:
    marks: Marks = {}

    def trace(step: str) -> None:
        if step in ("seen", "dial", "dialled", "connected") and step not in marks:
            marks[step], marks[f"cpu:{step}"] = time.monotonic(), time.thread_time()

    @asynccontextmanager
    async def relay() -> AsyncIterator[BaselineRelay]:
        config = BaselineConfig(**POLICY["baseline"])
        async with BaselineRelay(proc.url, config, trace=trace if instrument else None) as r:
            yield r

    async def main() -> list[Drop]:
        out: list[Drop] = []
        async with BASELINE.control(proc.control_path) as ctl, relay() as r:
            client = _BaselineClient(r)
            await client.wait_connected(15)
            await ctl.call("trace", on=True)
            for _ in range(n):
                marks.clear()
                with _GcClock() as gcs:
                    await _drop(BASELINE, client, ctl, marks, gcs if instrument else None)
                out.append(Drop(dict(marks)))
                ctx.progress.advance()
            await ctl.call("trace", on=False)
        return out

    return BASELINE.run(main)


def _peer_drops(ctx: Context, proc: ConnectorProcess, backend: Backend, n: int) -> list[Drop]:
    async def main() -> list[Drop]:
        out: list[Drop] = []
        async with open_peer(backend.name, proc.url) as client, backend.control(
            proc.control_path
        ) as ctl:
            await client.wait_connected(15)
            await ctl.call("trace", on=True)
            for _ in range(n):
                marks: Marks = {}
                await _drop(backend, client, ctl, marks)
                if client.seen_at is not None and client.seen_at >= marks["kill"]:
                    marks["seen"] = client.seen_at
                out.append(Drop(marks))
                ctx.progress.advance()
            await ctl.call("trace", on=False)
        return out

    return backend.run(main)


# (label, from mark, to mark, trio_relay only)
SPANS = (
    ("reset -> the client sees the drop", "kill", "seen", False),
    ("  of it: reset -> the task that sees it is woken", "kill", "woken", True),
    ("  of it: that task's step until the state changes", "woken", "seen", True),
    ("sees the drop -> dial starts", "seen", "dial", False),
    ("dial starts -> upgrade accepted (connector)", "dial", "open", False),
    ("  of it: TCP connect (the dialer)", "dial", "tcp", True),
    ("  of it: TCP up -> upgrade accepted", "tcp", "open", True),
    ("upgrade accepted -> hello read (connector)", "open", "hello", False),
    ("hello read -> descriptor written (connector)", "hello", "descriptor", False),
    ("descriptor written -> client connected", "descriptor", "connected", False),
    ("connected -> probe outbound read (connector)", "connected", "probe_in", False),
    ("probe outbound read -> probe succeeded", "probe_in", "ok", False),
    ("total: reset -> probe succeeded", "kill", "ok", False),
)


def _span(drops: list[Drop], a: str, b: str) -> list[float]:
    return [(d.marks[b] - d.marks[a]) * 1000 for d in drops if a in d.marks and b in d.marks]


# Client-side spans whose CPU (the process's only thread, time.thread_time()) is known:
# unlike wall time, it leaves out every moment another process had the CPU.
CPU_SPANS = (
    ("CPU: the step that sees the drop", "woken", "seen", True),
    ("CPU: sees the drop -> dial starts", "seen", "dial", False),
    ("CPU: TCP connect (the dialer)", "dial", "tcp", True),
    ("CPU: sees the drop -> connected (all of the redial's own work)", "seen", "connected",
     False),
)  # fmt: skip


def run(ctx: Context) -> Result:
    rounds = ctx.pick(4, 2, 1)
    per_round = ctx.count(25, 10, 4)
    samples: dict[str, list[Drop]] = {
        name: [] for name in ("trio_relay", "baseline", "trio_relay bare", "baseline bare")
    }
    peers: dict[str, list[Drop]] = {b.name: [] for b in PEER_BACKENDS}
    ctx.progress.start("redial_steps", rounds * per_round * (4 + len(PEER_BACKENDS)))
    with ctx.connector() as proc:
        for r in range(rounds):
            # Alternate who goes first, as every benchmark does.
            order = ("trio_relay", "baseline") if r % 2 == 0 else ("baseline", "trio_relay")
            for name in order:
                run_drops = _trio_relay_drops if name == "trio_relay" else _baseline_drops
                samples[name] += run_drops(ctx, proc, per_round, True)
                samples[f"{name} bare"] += run_drops(ctx, proc, per_round, False)
            for backend in PEER_BACKENDS:
                peers[backend.name] += _peer_drops(ctx, proc, backend, per_round)
    ctx.progress.finish()

    result = Result("redial_steps", "zero-backoff redial after a TCP reset, step by step")
    tr, bl = samples["trio_relay"], samples["baseline"]
    for label, a, b, trio_only in SPANS:
        st, sb = _span(tr, a, b), _span(bl, a, b)
        for q in (50, 90):
            result.rows.append(
                Row(
                    f"{label}, p{q}",
                    "ms",
                    percentile(st, q),
                    None if trio_only else percentile(sb, q),
                    len(st),
                    None if trio_only else len(sb),
                    text_base="(not seen)" if trio_only else None,
                )
            )
    for label, a, b, trio_only in CPU_SPANS:
        ct, cb = _span(tr, f"cpu:{a}", f"cpu:{b}"), _span(bl, f"cpu:{a}", f"cpu:{b}")
        result.rows.append(
            Row(f"{label}, p50", "µs", 1000 * percentile(ct, 50),
                None if trio_only else 1000 * percentile(cb, 50), len(ct),
                None if trio_only else len(cb), text_base="(not seen)" if trio_only else None)
        )  # fmt: skip
    bare_t = _span(samples["trio_relay bare"], "kill", "ok")
    bare_b = _span(samples["baseline bare"], "kill", "ok")
    for q in (50, 99):
        result.rows.append(
            Row(f"total without hooks, p{q}", "ms", percentile(bare_t, q),
                percentile(bare_b, q), len(bare_t), len(bare_b))
        )  # fmt: skip
    for name, drops in peers.items():
        seen_p = _span(drops, "kill", "seen")
        seen_t = _span(tr, "kill", "seen")
        result.rows.append(
            Row(f"reset -> the client sees the drop vs the {name} peer, p50", "ms",
                percentile(seen_t, 50), percentile(seen_p, 50), len(seen_t), len(seen_p))
        )  # fmt: skip
        totals = _span(drops, "kill", "ok")
        for q in (50, 99):
            result.rows.append(
                Row(f"total without hooks vs the {name} peer, p{q}", "ms",
                    percentile(bare_t, q), percentile(totals, q), len(bare_t), len(totals))
            )  # fmt: skip
    for label, key in (("cyclic GC during the redial (ms)", "gc_ms"),):
        gt = [d.marks[key] for d in tr if key in d.marks]
        gb = [d.marks[key] for d in bl if key in d.marks]
        for q in (50, 90):
            result.rows.append(
                Row(f"{label}, p{q}", "ms", percentile(gt, q), percentile(gb, q), len(gt), len(gb))
            )
    for name, drops in (("trio_relay", tr), ("baseline", bl)):
        gens = Counter(int(d.marks.get("gc_generation", -1)) for d in drops)
        result.notes.append(
            f"{name}: redials with a cyclic collection by oldest generation: "
            + ", ".join(f"gen {g}: {n}" if g >= 0 else f"none: {n}" for g, n in sorted(gens.items())
            )
        )
    steps = [len(d.between) for d in tr if d.between]
    turns = [d.turns for d in tr if d.between]
    result.rows += [
        Row("trio_relay: task steps from seeing the drop to the dial, p50", "count",
            percentile([float(s) for s in steps], 50), None, len(steps), None, better="",
            text_base="-"),
        Row("trio_relay: run-loop turns from seeing the drop to the dial, p50", "count",
            percentile([float(t) for t in turns], 50), None, len(turns), None, better="",
            text_base="-"),
    ]  # fmt: skip
    sequences = Counter(d.between for d in tr if d.between).most_common(2)
    for sequence, count in sequences:
        result.notes.append(
            f"trio_relay, seeing the drop -> dial ({count} of {len(steps)} drops): "
            + " -> ".join(sequence)
        )
    result.notes += [
        "each drop: the connector resets the TCP connection (abort); both clients with zero "
        "backoff (trio_relay backoff_first_delay=0, backoff_initial=0, backoff_stable_after=0;"
        " baseline backoff_initial=0, backoff_reset_after=0)",
        "marks: connector events on its own clock; trio_relay by a trio Instrument (task "
        "steps, the public relay.state after each) and a dialer around the real one; the "
        "baseline by its trace hook. The baseline's dial includes the upgrade (websockets' "
        "connect), so its TCP split is not seen",
        "'without hooks': the same drops, no instrument, no dialer wrapper, no trace; the "
        "peers (benchmarks/peers.py) redial at once, with no backoff at all",
        f"{rounds} round(s) of {per_round} drops per client, alternating who goes first",
    ]
    result.configs = {
        "trio_relay": TRIO_RELAY.config(POLICY["trio_relay"]),
        "baseline": BASELINE.config(POLICY["baseline"]),
        **{b.name: b.config({}) for b in PEER_BACKENDS},
    }
    result.samples = {
        name: [d.marks for d in drops] for name, drops in samples.items()
    } | {f"{name} peer": [d.marks for d in v] for name, v in peers.items()}
    return result
