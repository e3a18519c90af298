"""The redial benchmark's "healthy link" scenario, with every default untouched.

One session per implementation and round:

1. connect and stay up for :data:`HEALTHY` seconds (longer than trio_relay's
   ``backoff_stable_after``, so the link counts as healthy);
2. **first drop** (a TCP reset at the connector): time to a successful probe;
3. **second drop**, :data:`SECOND_DROP_AFTER` seconds after the first: the same. A policy
   that keeps its backoff ladder across healthy connections pays here;
4. after another :data:`HEALTHY` seconds up, a **connector restart**: every session
   reset, the listener down :data:`RESTART_DOWN` seconds; time from "listening again"
   to the first successful probe.

The waits are the point (the policy reacts to how long a link lived), so this takes
about half a minute per implementation and round; ``--tiny`` shortens them to run the
code path only, and its figures then mean nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ._backends import Backend, Client, Control, recover, run_session
from ._context import Context
from ._control import ConnectorProcess

__all__ = [
    "HEALTHY",
    "RESTART_DOWN",
    "SECOND_DROP_AFTER",
    "Healthy",
    "healthy_round",
    "restart_and_recover",
    "waits",
]

HEALTHY = 6.0
SECOND_DROP_AFTER = 10.0
RESTART_DOWN = 0.5


@dataclass(frozen=True)
class Healthy:
    first_drop_ms: float
    second_drop_ms: float
    restart_ms: float
    """From the listener being back to the first successful probe."""


async def restart_and_recover(backend: Backend, client: Client, ctl: Control) -> float:
    """Restart the connector (every session reset, the listener down
    :data:`RESTART_DOWN` seconds); milliseconds from listening again to a successful
    probe."""
    before = client.connects

    async def restart() -> dict[str, Any]:
        return await ctl.call("restart", down=RESTART_DOWN)

    async def wait() -> float:
        return await recover(backend, client, before, limit=60)

    reply, t_ok = await backend.gather([restart, wait])
    return (float(t_ok) - float(reply["t_up"])) * 1000


def waits(ctx: Context) -> tuple[float, float]:
    """(seconds up before a drop, seconds between the two drops) in this mode."""
    if ctx.mode == "tiny":
        return 0.3, 0.5
    return HEALTHY, SECOND_DROP_AFTER


def healthy_round(ctx: Context, backend: Backend, proc: ConnectorProcess) -> Healthy:
    up, gap = waits(ctx)

    async def sleep_until(deadline: float) -> None:
        await backend.sleep(max(0.0, deadline - time.monotonic()))

    async def drop(client: Client, ctl: Control) -> tuple[float, float]:
        before = client.connects
        t_kill = float((await ctl.call("abort"))["t"])
        t_ok = await recover(backend, client, before)
        return t_kill, (t_ok - t_kill) * 1000

    async def body(client: Client, ctl: Control) -> Healthy:
        await backend.sleep(up)
        t_first, first_ms = await drop(client, ctl)
        ctx.progress.advance()
        await sleep_until(t_first + gap)
        t_second, second_ms = await drop(client, ctl)
        ctx.progress.advance()
        await sleep_until(t_second + up)
        restart_ms = await restart_and_recover(backend, client, ctl)
        ctx.progress.advance()
        return Healthy(first_ms, second_ms, restart_ms)

    return run_session(backend, proc, {}, body)
