"""``detect``: a peer that goes silent (keeps the socket, answers nothing, not even
pings), both implementations on a scaled keepalive (ping every 1 s, dead after 2 s):
time from the silence to the drop being seen, and to a successful request on a new
connection.

With root and network namespaces (see :mod:`trio_relay.testing.netns`) it also takes the
kernel path: the connector lives behind a veth pair whose packets are then all dropped
(no FIN, no RST), once with the scaled pings, once with pings off and only TCP keepalive
(idle 1 s, interval 1 s, 2 probes) to find the dead peer.
"""

from __future__ import annotations

import random
from typing import Any

from trio_relay.testing import netns

from ._backends import (
    BASELINE,
    TRIO_RELAY,
    Backend,
    Client,
    Control,
    alternate,
    recover,
    run_session,
    wait_dropped,
)
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, median

# Both keep the backoff ladder across young links (trio_relay: backoff_stable_after,
# baseline: reset_after); 0 makes the
# redial after each detected drop the first of its ladder, as for a long-lived link.
SCALED: dict[str, dict[str, Any]] = {
    "trio_relay": {"ping_interval": 1.0, "ping_timeout": 2.0, "backoff_stable_after": 0},
    "baseline": {"ping_interval": 1.0, "ping_timeout": 2.0, "backoff_reset_after": 0},
}
# Kernel path, pings off (an hour) so that only TCP keepalive can notice. The baseline
# sets no keepalive options on its WebSocket (the replaced design had them on the HTTP
# side only), so it is expected not to notice at all.
KEEPALIVE_ONLY: dict[str, dict[str, Any]] = {
    "trio_relay": {
        "ping_interval": 3600.0,
        "ping_timeout": 7200.0,
        "backoff_stable_after": 0,
        "keepalive": {"idle": 1, "interval": 1, "count": 2},
    },
    "baseline": {"ping_interval": 3600.0, "ping_timeout": 7200.0, "backoff_reset_after": 0},
}
KEEPALIVE_LIMIT = 6.0
"""How long the keepalive-only case waits before it calls the peer "not detected"."""


def _silent_round(
    ctx: Context,
    backend: Backend,
    proc: ConnectorProcess,
    overrides: dict[str, Any],
    lead: float,
) -> dict[str, float]:
    async def body(client: Client, ctl: Control) -> dict[str, float]:
        await backend.sleep(lead)  # a random phase against the ping cycle
        before = client.connects
        t_kill = float((await ctl.call("silent"))["t"])
        t_drop = await wait_dropped(backend, client, limit=30)
        assert t_drop is not None, f"{backend.name} never noticed the silent peer"
        t_ok = await recover(backend, client, before)
        await ctl.call("reap_silent")
        ctx.progress.advance()
        return {"detect_s": t_drop - t_kill, "reconnect_s": t_ok - t_kill}

    return run_session(backend, proc, overrides, body)


def _kernel_round(
    ctx: Context,
    backend: Backend,
    host: netns.NetnsHost,
    proc: ConnectorProcess,
    overrides: dict[str, Any],
    lead: float,
    limit: float,
) -> float | None:
    async def body(client: Client, ctl: Control) -> float | None:
        await backend.sleep(lead)
        t_kill = host.vanish_sync()
        try:
            t_drop = await wait_dropped(backend, client, limit=limit)
        finally:
            host.restore_sync()
        ctx.progress.advance()
        return None if t_drop is None else t_drop - t_kill

    return run_session(backend, proc, overrides, body)


def _remote(backend: Backend, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    # The netns peer is not loopback; trio_relay refuses plaintext ws:// there by default.
    extra = {"allow_insecure": True} if backend is TRIO_RELAY else {}
    return {**overrides[backend.name], **extra}


KERNEL_CASES = (
    ("scaled pings", SCALED, 30.0),
    ("keepalive only", KEEPALIVE_ONLY, KEEPALIVE_LIMIT),
)
Kernel = dict[str, dict[str, list[float | None]]]


def run_kernel(
    ctx: Context,
    rounds: int,
    rng: random.Random,
    *,
    backends: tuple[Backend, ...] = (TRIO_RELAY, BASELINE),
    cases: tuple[tuple[str, dict[str, dict[str, Any]], float], ...] = KERNEL_CASES,
) -> Kernel:
    """The kernel path: case -> implementation -> seconds to notice (None: never)."""
    kernel: Kernel = {case: {b.name: [] for b in backends} for case, _, _ in cases}
    with (
        netns.netns_host() as host,
        ctx.connector(host=host.address, prefix=host.exec_prefix) as proc,
    ):
        for r in range(rounds):
            lead = rng.uniform(0.2, 1.2)
            for backend in alternate(r):
                if backend not in backends:
                    continue
                for case, overrides, limit in cases:
                    kernel[case][backend.name].append(
                        _kernel_round(
                            ctx, backend, host, proc, _remote(backend, overrides), lead, limit
                        )
                    )
    return kernel


def run(ctx: Context) -> Result:
    rounds = ctx.count(3, 1, 1)
    rng = random.Random(20240601)
    result = Result("detect", "silent peer -> drop seen -> reconnected (ping 1 s / timeout 2 s)")
    samples: dict[str, list[dict[str, float]]] = {"trio_relay": [], "baseline": []}
    kernel_error = netns.unavailable(probe=True)
    kernel_rounds = 0 if kernel_error else ctx.pick(2, 0, 0)
    if not kernel_error and not kernel_rounds:
        kernel_error = f"not run in {ctx.mode} mode (it takes ~25 s a round)"
    scaled = SCALED
    if ctx.mode == "tiny":
        # The test suite only needs the code path: spare it websockets' 10 s close wait.
        scaled = {**SCALED, "baseline": {**SCALED["baseline"], "close_timeout": 0.5}}
        result.notes.append("tiny mode: baseline close_timeout 0.5 s (default 10 s)")
    ctx.progress.start("detect", rounds * 2 + kernel_rounds * 4)
    with ctx.connector() as proc:
        for r in range(rounds):
            lead = rng.uniform(0.2, 1.2)
            for backend in alternate(r):
                samples[backend.name].append(
                    _silent_round(ctx, backend, proc, scaled[backend.name], lead)
                )
    kernel = run_kernel(ctx, kernel_rounds, rng) if kernel_rounds else {}
    ctx.progress.finish()

    tr, bl = samples["trio_relay"], samples["baseline"]
    for key, label in (
        ("detect_s", "silence -> drop seen"),
        ("reconnect_s", "silence -> reconnected"),
    ):
        for pick, name in ((median, "median"), (max, "max")):
            result.rows.append(
                Row(
                    f"loopback, {label}, {name}",
                    "s",
                    pick([s[key] for s in tr]),
                    pick([s[key] for s in bl]),
                    len(tr),
                    len(bl),
                )
            )
    if kernel_rounds:
        for case, by_impl in kernel.items():
            cells: dict[str, tuple[float | None, str | None]] = {}
            for name, values in by_impl.items():
                seen = [v for v in values if v is not None]
                missed = len(values) - len(seen)
                value = median(seen) if seen else None
                text = None
                if missed:
                    text = f"{missed}/{len(values)} not seen"
                    if seen:
                        text += f", else {median(seen):.2f} s"
                cells[name] = (value, text)
            result.rows.append(
                Row(
                    f"netns link dead, {case}: drop seen, median",
                    "s",
                    cells["trio_relay"][0],
                    cells["baseline"][0],
                    kernel_rounds,
                    kernel_rounds,
                    text_trio=cells["trio_relay"][1],
                    text_base=cells["baseline"][1],
                )
            )
        result.notes.append(
            "kernel path: connector in a network namespace behind a veth pair, every packet "
            "then dropped both ways (tc blackhole): no FIN, no RST. 'keepalive only': pings "
            "off; trio_relay's TCP keepalive idle 1 s, interval 1 s, 2 probes (and "
            "TCP_USER_TIMEOUT to match); the baseline sets no keepalive on its WebSocket, so "
            f"it is given up on after {KEEPALIVE_LIMIT:g} s"
        )
    else:
        result.notes.append(f"kernel path skipped: {kernel_error}")
    result.notes += [
        "silence = the connector stops reading, writing and answering pings; TCP stays up",
        "trio_relay declares the link dead after ping_timeout with nothing received and "
        "drops the socket at once; websockets (baseline) fails the connection when a "
        "pong is ping_timeout late (up to ping_interval + ping_timeout), then waits up to "
        "its close_timeout (default 10 s) for a closing handshake the silent peer never "
        "answers before its reader sees the end",
        "backoff_stable_after=0 (trio_relay) and backoff_reset_after=0 (baseline), so the "
        "redial after a detected drop is the first of its ladder: immediate for "
        "trio_relay, uniform [0.5, 1] s for the baseline",
    ]
    result.configs = {
        "loopback": {b.name: b.config(scaled[b.name]) for b in (TRIO_RELAY, BASELINE)},
        "keepalive_only": {
            b.name: b.config(KEEPALIVE_ONLY[b.name]) for b in (TRIO_RELAY, BASELINE)
        },
    }
    result.samples = {"loopback": samples, "netns": kernel}
    result.cdf = {
        f"{name}, silence -> drop seen": [s["detect_s"] * 1000 for s in v]
        for name, v in samples.items()
    }
    return result
