"""``inbound``: buffered user messages per second, from the connector's first send to
its last ack.

trio_relay's path is the whole pipeline: decode, dedupe, a (trivial) ``on_message``
handler in its chat's lane, then the ack once the handler returned. The baseline has no
handler hook and acks each event on receipt, from its reader (the replaced design): a
cheaper path, shown for comparison. The connector keeps at most ``WINDOW`` deliveries
unacknowledged (a flow-control window below trio_relay's bounded queue of 1,000, past
which buffered deliveries are left for the next handshake by design).
"""

from __future__ import annotations

from ._backends import BASELINE, TRIO_RELAY, Backend, Client, Control, alternate, run_session
from ._context import Context
from ._control import ConnectorProcess
from ._report import Result, Row, median

WINDOW = 512
CHATS = 16


def _round(ctx: Context, backend: Backend, proc: ConnectorProcess, n: int) -> tuple[float, int]:
    handled = 0

    def on_message() -> None:
        nonlocal handled
        handled += 1

    async def body(client: Client, ctl: Control) -> tuple[float, int]:
        reply = await ctl.call("inbound", n=n, window=WINDOW, chats=CHATS, timeout=120)
        ctx.progress.advance()
        return n / (float(reply["t1"]) - float(reply["t0"])), handled

    return run_session(backend, proc, {}, body, on_message=on_message)


def run(ctx: Context) -> Result:
    n = ctx.count(20_000, 5_000, 1_000)
    rounds = ctx.pick(3, 1, 1)
    rates: dict[str, list[float]] = {"trio_relay": [], "baseline": []}
    handled: list[int] = []
    ctx.progress.start("inbound", rounds * 2)
    with ctx.connector() as proc:
        for r in range(rounds):
            for backend in alternate(r):
                rate, count = _round(ctx, backend, proc, n)
                rates[backend.name].append(rate)
                if backend is TRIO_RELAY:
                    handled.append(count)
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
    result.notes += [
        f"{n:,} distinct events per round over {CHATS} chats, at most {WINDOW} unacked",
        "trio_relay: decode + dedupe + on_message handler + ack after the handler; baseline: "
        "decode + ack on receipt, no handler and no dedupe (the replaced design)",
        f"trio_relay handler calls per round: {handled} (expected {n} each)",
    ]
    result.configs = {b.name: b.config({}) for b in (TRIO_RELAY, BASELINE)}
    result.samples = {"events_per_s": rates, "handled": handled}
    return result
