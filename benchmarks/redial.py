"""``redial``: how long a drop costs, from the kill (at the connector) until a probe
request succeeds again.

Drops cycle through four kinds: a TCP reset, a 1011 close, a 1001 close, and a peer
that falls silent for 20 ms and then closes with 1000 (timed from the close). Each
implementation runs with its default policy and with zero backoff; the second isolates
the redial mechanism from the policy. Then a connector restart: every session reset,
500 ms down, up again; timed from "up" to the first successful probe.
"""

from __future__ import annotations

from typing import Any

from ._backends import BASELINE, TRIO_RELAY, Backend, Client, Control, alternate, recover
from ._backends import run_session as session
from ._context import Context
from ._report import Result, Row, Target, percentile

KINDS = ("rst", "close 1011", "close 1001", "silent+close")
SILENCE = 0.020
RESTART_DOWN = 0.5

# Both keep the backoff ladder across connections younger than reset_after (60 s), so
# back-to-back drops would measure the ladder; reset_after=0 makes every drop land on a
# connection that counts as stable. Every other default is untouched.
POLICIES: dict[str, dict[str, dict[str, Any]]] = {
    "default": {
        "trio_relay": {"backoff_reset_after": 0},
        "baseline": {"backoff_reset_after": 0},
    },
    "zero backoff": {
        "trio_relay": {"backoff_reset_after": 0, "backoff_first_delay": 0, "backoff_initial": 0},
        "baseline": {"backoff_reset_after": 0, "backoff_initial": 0},
    },
}


async def _kill(ctl: Control, kind: str) -> float:
    if kind == "rst":
        reply = await ctl.call("abort")
    elif kind == "close 1011":
        reply = await ctl.call("close", code=1011, reason="internal error")
    elif kind == "close 1001":
        reply = await ctl.call("close", code=1001, reason="going away")
    else:
        reply = await ctl.call("silent_close", silence=SILENCE, code=1000, reason="")
    return float(reply["t"])


def _drops(
    ctx: Context, backend: Backend, policy: str, proc: Any, kinds: list[str]
) -> list[tuple[str, float]]:
    async def body(client: Client, ctl: Control) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        for kind in kinds:
            before = client.connects
            t_kill = await _kill(ctl, kind)
            t_ok = await recover(backend, client, before)
            out.append((kind, (t_ok - t_kill) * 1000))
            ctx.progress.advance()
        return out

    return session(backend, proc, POLICIES[policy][backend.name], body)


def _restart(ctx: Context, backend: Backend, policy: str, proc: Any) -> float:
    async def body(client: Client, ctl: Control) -> float:
        before = client.connects

        async def restart() -> dict[str, Any]:
            return await ctl.call("restart", down=RESTART_DOWN)

        async def wait() -> float:
            return await recover(backend, client, before, limit=60)

        reply, t_ok = await backend.gather([restart, wait])
        ctx.progress.advance()
        return (float(t_ok) - float(reply["t_up"])) * 1000

    return session(backend, proc, POLICIES[policy][backend.name], body)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run(ctx: Context) -> Result:
    n = ctx.count(200, 40, 8)
    n_base_default = min(n, ctx.pick(20, 6, 4))
    rounds = max(1, min(ctx.pick(10, 4, 2), n_base_default))
    restarts = ctx.pick(5, 1, 1)
    plan = {
        ("trio_relay", "default"): n,
        ("trio_relay", "zero backoff"): n,
        ("baseline", "zero backoff"): n,
        ("baseline", "default"): n_base_default,
    }
    share = {key: _split(total, rounds) for key, total in plan.items()}
    samples: dict[tuple[str, str], list[tuple[str, float]]] = {key: [] for key in plan}
    restart_samples: dict[tuple[str, str], list[float]] = {
        (b.name, p): [] for b in (TRIO_RELAY, BASELINE) for p in POLICIES
    }
    ctx.progress.start("redial", sum(plan.values()) + restarts * len(restart_samples))
    with ctx.connector() as proc:
        for r in range(rounds):
            for backend in alternate(r):
                for policy in POLICIES:
                    key = (backend.name, policy)
                    done = len(samples[key])
                    kinds = [KINDS[(done + i) % len(KINDS)] for i in range(share[key][r])]
                    if kinds:
                        samples[key] += _drops(ctx, backend, policy, proc, kinds)
        for r in range(restarts):
            for backend in alternate(r):
                for policy in POLICIES:
                    restart_samples[(backend.name, policy)].append(
                        _restart(ctx, backend, policy, proc)
                    )
    ctx.progress.finish()
    return _result(samples, restart_samples)


def _result(
    samples: dict[tuple[str, str], list[tuple[str, float]]],
    restarts: dict[tuple[str, str], list[float]],
) -> Result:
    def ms(name: str, policy: str, kind: str | None = None) -> list[float]:
        return [v for k, v in samples[(name, policy)] if kind is None or k == kind]

    result = Result("redial", "kill at the connector -> first successful probe")
    for policy in POLICIES:
        tr, bl = ms("trio_relay", policy), ms("baseline", policy)
        for q, label in ((50, "p50"), (90, "p90"), (99, "p99"), (100, "max")):
            result.rows.append(
                Row(
                    f"{policy}: {label}",
                    "ms",
                    percentile(tr, q),
                    percentile(bl, q),
                    len(tr),
                    len(bl),
                )
            )
        for kind in KINDS:
            tk, bk = ms("trio_relay", policy, kind), ms("baseline", policy, kind)
            result.rows.append(
                Row(
                    f"{policy}: {kind}, p50",
                    "ms",
                    percentile(tk, 50),
                    percentile(bk, 50),
                    len(tk),
                    len(bk),
                )
            )
    for policy in POLICIES:
        tr, bl = restarts[("trio_relay", policy)], restarts[("baseline", policy)]
        for q, label in ((50, "p50"), (100, "max")):
            result.rows.append(
                Row(
                    f"restart ({policy}): up -> probe ok, {label}",
                    "ms",
                    percentile(tr, q),
                    percentile(bl, q),
                    len(tr),
                    len(bl),
                )
            )
    result.notes += [
        "backoff_reset_after=0 for both implementations (both keep the backoff ladder across "
        "connections younger than 60 s, so back-to-back drops would measure the ladder, "
        "not a redial); all other defaults untouched",
        "default policy: trio_relay redials a stable connection at once (backoff_first_delay "
        "0); the baseline always waits uniform [0.5, 1] s first, so it gets fewer samples",
        "zero backoff: trio_relay backoff_first_delay=0, backoff_initial=0; baseline "
        "backoff_initial=0",
        f"silent+close: {SILENCE * 1000:.0f} ms of silence, then a 1000 close, timed from the "
        "close; restart: every session reset, listener down for "
        f"{RESTART_DOWN * 1000:.0f} ms, timed from 'up'",
        "probe: wait for the client's own connected signal, then one request; the connector "
        "runs in a separate process, kill timestamps are its time.monotonic()",
    ]
    tr = ms("trio_relay", "default")
    p50 = percentile(tr, 50)
    result.targets.append(
        Target(
            "redial p50 <= 10 ms with trio_relay's defaults",
            f"{p50:.2f} ms (baseline {percentile(ms('baseline', 'default'), 50):.0f} ms)",
            p50 <= 10,
            "" if p50 <= 10 else f"missed by {p50 - 10:.2f} ms",
        )
    )
    result.configs = {
        policy: {b.name: b.config(POLICIES[policy][b.name]) for b in (TRIO_RELAY, BASELINE)}
        for policy in POLICIES
    }
    result.samples = {
        "drops_ms": {f"{n} / {p}": v for (n, p), v in samples.items()},
        "restart_ms": {f"{n} / {p}": v for (n, p), v in restarts.items()},
    }
    result.cdf = {f"{n}, {p}": ms(n, p) for (n, p) in samples}
    return result
