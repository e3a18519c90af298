"""``inbound``: buffered user messages per second, from the connector's first send to
its last ack.

trio_relay's path is the whole pipeline: decode, dedupe, a (trivial) ``on_message``
handler in its chat's lane, then the ack once the handler returned. The baseline has no
handler hook and acks each event on receipt, from its reader (the replaced design): a
cheaper path, shown for comparison. The connector keeps at most ``WINDOW`` deliveries
unacknowledged (a flow-control window below trio_relay's bounded queue of 1,000, past
which buffered deliveries are left for the next handshake by design).

The dedupe stores side by side: trio_relay runs the same rounds once per store (memory,
the default; SQLite in a temporary file; Redis on a throwaway ``redis-server``), and the
added latency per delivery is what one delivery waits for its store, claim then commit,
one at a time (the SQLite write and the Redis commit go out behind the ack).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio

import trio_relay

from ._backends import (
    BASELINE,
    TRIO_RELAY,
    Backend,
    Client,
    Control,
    Overrides,
    alternate,
    run_session,
)
from ._context import Context
from ._control import ConnectorProcess
from ._redis import redis_url
from ._report import Result, Row, median

WINDOW = 512
CHATS = 16


def _round(
    ctx: Context, backend: Backend, proc: ConnectorProcess, n: int, overrides: Overrides
) -> tuple[float, int]:
    handled = 0

    def on_message() -> None:
        nonlocal handled
        handled += 1

    async def body(client: Client, ctl: Control) -> tuple[float, int]:
        reply = await ctl.call("inbound", n=n, window=WINDOW, chats=CHATS, timeout=120)
        ctx.progress.advance()
        return n / (float(reply["t1"]) - float(reply["t0"])), handled

    return run_session(backend, proc, overrides, body, on_message=on_message)


StoreMaker = Callable[[], trio_relay.DedupeStore]


@contextmanager
def _stores() -> Iterator[dict[str, StoreMaker | None]]:
    """name -> a maker of a fresh store (``None``: not available here)."""
    with tempfile.TemporaryDirectory(prefix="trio-relay-bench-") as directory, \
            redis_url() as url:
        counter = iter(range(1_000_000))

        def sqlite() -> trio_relay.DedupeStore:
            return trio_relay.SqliteDedupeStore(os.path.join(directory, f"{next(counter)}.db"))

        def redis() -> trio_relay.DedupeStore:
            # A fresh prefix per round: every round's keys are new to the store.
            assert url is not None
            return trio_relay.RedisDedupeStore(url, prefix=f"bench{next(counter)}:")

        yield {
            "memory": trio_relay.MemoryDedupeStore,
            "sqlite": sqlite,
            "redis": redis if url is not None else None,
        }


def _store_latency(make: StoreMaker, n: int) -> float:
    """Mean seconds one delivery waits for its store (claim, then commit), sequentially."""

    async def main() -> float:
        store = make()
        stats = trio_relay.RelayStats()
        async with store.open(namespace="bench", capacity=max(n, 1), stats=stats) as session:
            await session.load_recent()
            start = time.perf_counter()
            for i in range(n):
                key = f"slack:C1:{i}"
                await session.claim(key)
                session.commit(key)
            return (time.perf_counter() - start) / n

    return trio.run(main, restrict_keyboard_interrupt_to_checkpoints=True)



def run(ctx: Context) -> Result:
    n = ctx.count(20_000, 5_000, 1_000)
    rounds = ctx.pick(3, 1, 1)
    rates: dict[str, list[float]] = {"trio_relay": [], "baseline": []}
    by_store: dict[str, list[float]] = {}
    latency: dict[str, float] = {}
    handled: list[int] = []
    with _stores() as stores, ctx.connector() as proc:
        extra = [name for name, make in stores.items() if make is not None and name != "memory"]
        ctx.progress.start("inbound", rounds * (2 + len(extra)))
        for r in range(rounds):
            for backend in alternate(r):
                rate, count = _round(ctx, backend, proc, n, {})
                rates[backend.name].append(rate)
                if backend is TRIO_RELAY:
                    handled.append(count)
            for name in extra:
                make = stores[name]
                assert make is not None
                rate, count = _round(ctx, TRIO_RELAY, proc, n, {"dedupe_store": make()})
                by_store.setdefault(name, []).append(rate)
                handled.append(count)
        by_store = {"memory": rates["trio_relay"], **by_store}
        for name, make in stores.items():
            if make is not None:
                latency[name] = _store_latency(make, ctx.count(5_000, 2_000, 500))
    ctx.progress.finish()

    result = Result("inbound", "buffered events: connector send -> handler -> ack")
    tr, bl = rates["trio_relay"], rates["baseline"]
    result.rows += [
        Row(
            "events/s, median of rounds",
            "ev/s",
            median(tr),
            median(bl),
            len(tr),
            len(bl),
            better="higher",
        ),
        Row("events/s, worst round", "ev/s", min(tr), min(bl), len(tr), len(bl), better="higher"),
    ]
    labels = {"memory": "MemoryDedupeStore", "sqlite": "SqliteDedupeStore",
              "redis": "RedisDedupeStore"}
    for name, samples in by_store.items():
        result.rows.append(Row(
            f"events/s with {labels[name]}", "ev/s", median(samples), median(bl),
            len(samples), len(bl), better="higher",
        ))
    for name, seconds in latency.items():
        result.rows.append(Row(
            f"added latency per delivery, {labels[name]}", "µs", seconds * 1e6, None,
            better="", text_base="no store",
        ))
    missing = [name for name, make in stores.items() if make is None]
    result.notes += [
        f"{n:,} distinct events per round over {CHATS} chats, at most {WINDOW} unacked",
        "trio_relay: decode + dedupe + on_message handler + ack after the handler; baseline: "
        "decode + ack on receipt, no handler and no dedupe (the replaced design)",
        "events/s with each store: the same rounds with RelayConfig(dedupe_store=...); "
        "added latency: one delivery's wait for its store (claim, then commit), sequential",
        f"trio_relay handler calls per round: {handled} (expected {n} each)",
    ]
    if missing:
        result.notes.append(f"not measured (redis-server not installed): {', '.join(missing)}")
    result.configs = {b.name: b.config({}) for b in (TRIO_RELAY, BASELINE)}
    result.samples = {
        "events_per_s": rates,
        "events_per_s_by_store": by_store,
        "store_latency_s": latency,
        "handled": handled,
    }
    return result
