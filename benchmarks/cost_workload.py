"""The workload ``bench cost`` counts (`.cost`), run by one client in a process of
its own, under callgrind or not::

    python -m trio_relay_benchmarks.cost_workload --client NAME --url URL --plan JSON

It talks to the fast connector in lockstep (`.fast_connector`: a batch is answered
in one message once all of it arrived), so what the client reads and writes is the
same in every run whatever the timing of the two processes. Between its phases it calls
`mark` (``os.getpgrp()``, a call nothing else in the process makes): callgrind,
started with ``--dump-before=getpgrp``, writes the instructions counted since the last
mark to a file of their own, so each phase is counted apart from the start-up, the
imports and the other phases. A phase is preceded by a warm-up that is counted apart
too (and not used): caches, pools and the first connection's one-time work are done.

Phases, in order (each named in the plan with its count):

- ``requests@K``: K requesters, each making ``rounds`` requests one after another; the
  connector answers every K in one message (K = 1: sequential).
- ``redial``: ``count`` times: a request the connector answers with a TCP reset (the
  connection's end, read by the client), then, once the client is connected again, one
  request and its result.
- ``encode``: ``count`` encodings of the benchmark's action to JSON (msgspec where it is
  installed, else the standard library's): the one piece of a request's work that the
  Trio floor client leaves out (it encodes an action once and reuses the bytes) and
  that no real client can, since every caller's action is its own.

The idle-bytes figure (tracemalloc) is measured by ``--idle N`` instead, without
callgrind: N idle connected clients in this process, the traced bytes they hold.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tracemalloc
from contextlib import AsyncExitStack
from typing import Any

from ._backends import BASELINE, TRIO_RELAY, Backend, Client
from .floor_client import FLOOR_BACKEND

__all__ = ["BACKENDS", "OVERRIDES", "mark", "main"]

BACKENDS: dict[str, Backend] = {b.name: b for b in (TRIO_RELAY, BASELINE, FLOOR_BACKEND)}

ACTION: dict[str, Any] = {"op": "typing", "chat_id": "bench"}
RESET: dict[str, Any] = {"op": "typing", "chat_id": "cost:reset"}
TIMEOUT = 600.0
"""Per request: under callgrind a 256-way round takes seconds of wall time."""

# Equal policy (zero backoff on both, as `bench redial` runs it) and no keepalive pings
# during the count (a ping is a timed event: it would land in one run and not the next).
# Every other setting is the client's default.
OVERRIDES: dict[str, dict[str, Any]] = {
    TRIO_RELAY.name: {
        "backoff_stable_after": 0,
        "backoff_first_delay": 0,
        "backoff_initial": 0,
        "ping_interval": 3600.0,
        "ping_timeout": 7200.0,
    },
    BASELINE.name: {"backoff_initial": 0, "ping_interval": 3600.0, "ping_timeout": 7200.0},
    FLOOR_BACKEND.name: {},
}


def mark() -> None:
    """The phase boundary callgrind dumps at (``--dump-before=getpgrp``)."""
    os.getpgrp()


def batch(k: int) -> dict[str, Any]:
    return {"op": "typing", "chat_id": f"cost:batch={k}"}


class WorkloadFailed(RuntimeError):
    pass


async def _requests(backend: Backend, client: Client, k: int, rounds: int) -> None:
    failures = 0

    async def requester() -> None:
        nonlocal failures
        for _ in range(rounds):
            reply = await client.request(ACTION, TIMEOUT)
            failures += not reply.success

    await backend.gather([requester] * k)
    if failures:
        raise WorkloadFailed(f"{backend.name}: {failures} of {k * rounds} requests failed")


async def _redials(client: Client, count: int) -> None:
    for _ in range(count):
        before = client.connects
        reply = await client.request(RESET, TIMEOUT)
        if reply.success:
            raise WorkloadFailed("the connector answered the reset request")
        await client.wait_connected(TIMEOUT)
        reply = await client.request(ACTION, TIMEOUT)
        if not reply.success or client.connects != before + 1:
            raise WorkloadFailed(f"redial: {reply} after {client.connects - before} connects")


def _encodings(count: int) -> None:
    try:
        import msgspec
    except ImportError:
        encode: Any = json.dumps
    else:
        encode = msgspec.json.encode
    for _ in range(count):
        encode(ACTION)


async def _counted(backend: Backend, url: str, plan: list[dict[str, Any]]) -> None:
    async with backend.client(url, OVERRIDES[backend.name]) as client:
        await client.wait_connected(TIMEOUT)
        for phase in plan:
            name, count, warm = phase["name"], int(phase["count"]), int(phase["warm"])
            if name == "encode":
                _encodings(warm)
                gc.collect()
                mark()
                _encodings(count)
            elif name == "redial":
                await _reply_ok(client, batch(1))
                await _redials(client, warm)
                gc.collect()
                mark()  # the warm-up's count ends here
                await _redials(client, count)
            else:
                k = int(name.removeprefix("requests@"))
                await _reply_ok(client, batch(k))
                await _requests(backend, client, k, warm)
                gc.collect()
                mark()
                await _requests(backend, client, k, count)
            mark()  # the phase's count ends here


async def _reply_ok(client: Client, action: dict[str, Any]) -> None:
    reply = await client.request(action, TIMEOUT)
    if not reply.success:
        raise WorkloadFailed(f"{action['chat_id']}: {reply}")


async def _idle(backend: Backend, url: str, n: int, warm: int) -> dict[str, int]:
    async with AsyncExitStack() as stack:

        async def open_some(count: int) -> None:
            clients = [
                await stack.enter_async_context(backend.client(url, {})) for _ in range(count)
            ]
            for client in clients:
                await client.wait_connected(60)

        await open_some(warm)
        await backend.sleep(0.3)
        gc.collect()
        tracemalloc.start()
        before, tasks_before = tracemalloc.get_traced_memory()[0], backend.tasks_now()
        await open_some(n)
        await backend.sleep(0.3)
        gc.collect()
        after, tasks_after = tracemalloc.get_traced_memory()[0], backend.tasks_now()
        tracemalloc.stop()
        figures = {"bytes": after - before, "tasks": tasks_after - tasks_before, "n": n}
        print(json.dumps(figures), flush=True)
        os._exit(0)  # tearing down the relays measures nothing


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trio_relay_benchmarks.cost_workload")
    parser.add_argument("--client", choices=list(BACKENDS), required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--plan", help="the counted phases, as JSON")
    parser.add_argument("--idle", type=int, help="N idle clients: print the bytes they hold")
    args = parser.parse_args(argv)
    backend = BACKENDS[args.client]
    if args.idle is not None:
        backend.run(lambda: _idle(backend, args.url, args.idle, warm=5))
        return
    plan = json.loads(args.plan)
    gc.collect()
    gc.freeze()  # the imports' objects out of every collection's scan, as in `bench`
    backend.run(lambda: _counted(backend, args.url, plan))
    print(json.dumps({"ok": True}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
