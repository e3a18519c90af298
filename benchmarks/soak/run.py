"""One soak run: the connector, the relay, the actors and the faults for ``seconds``,
then repair, drain, close, measure, and check (:func:`run_soak`)."""

from __future__ import annotations

import importlib
import logging
import random
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import trio

import trio_relay
from trio_relay import DedupeStore, RedisDedupeStore, UpgradeAuth
from trio_relay._core.frames import Outbound
from trio_relay.testing import (
    FaultDialer,
    ReferenceConnector,
    Session,
    live_tasks,
    open_connector,
    open_fds,
    rss_bytes,
)

from . import actors, ledger
from .faults import Hit, injector
from .hostile import hostile
from .invariants import Resources, check, relay_objects
from .observe import errors_visible
from .report import Invariant, SoakReport
from .settings import (
    GATEWAY_ID,
    IDEMPOTENCY_WINDOW,
    MESSAGE_BYTES,
    WATCHDOG_GRACE,
    dedupe_store,
    memory_tolerance,
    soak_config,
)
from .state import Soak

__all__ = ["run_soak"]


async def _guarded(soak: Soak) -> None:
    with trio.move_on_after(soak.seconds + soak.watchdog_grace) as watchdog:
        await _run(soak)
    if watchdog.cancelled_caught:  # pragma: no cover - only if something wedged
        soak.report.invariants.append(
            Invariant("the soak finished", False, "wedged: cancelled by the watchdog")
        )


def _counts() -> tuple[int, int]:
    return open_fds() or -1, len(live_tasks())


async def _run(soak: Soak) -> None:
    report = soak.report
    started = trio.current_time()

    async def answer(session: Session, frame: Outbound) -> dict[str, Any] | None:
        return await actors.answer(soak, session, frame)

    async with open_connector(
        secrets={GATEWAY_ID: soak.secret},
        outbound_handler=answer,
        max_message_bytes=MESSAGE_BYTES,
        record=False,
        idempotency_window=IDEMPOTENCY_WINDOW if soak.idempotency else None,
    ) as connector:
        store = dedupe_store(soak.dedupe)
        if isinstance(store, RedisDedupeStore):
            # Its client library is imported on first use: before the first measurement,
            # so that the resident-memory check sees the run, not an import.
            importlib.import_module("coredis")
            importlib.import_module("coredis.retry")
        (fds0, tasks0), rss0 = _counts(), rss_bytes(trim=True) or 0
        objects0 = relay_objects()
        until = trio.current_time() + soak.seconds
        report.relay_stats = await _run_relay(soak, connector, until, store)
        await _wait_sessions_over(connector)
        fds1, tasks1 = await _settled(fds0, tasks0)
        objects1 = relay_objects()
        rss1 = rss_bytes(trim=True) or 0
        pending = connector.pending(GATEWAY_ID)
    report.wall_time = trio.current_time() - started
    report.resources = {
        "fds": (fds0, fds1),
        "tasks": (tasks0, tasks1),
        "rss MiB": (round(rss0 / 2**20, 1), round(rss1 / 2**20, 1)),
    }
    resources = Resources(
        fds=(fds0, fds1),
        tasks=(tasks0, tasks1),
        objects=(objects0, objects1),
        rss_growth=rss1 - rss0,
        rss_tolerance=memory_tolerance(len(connector.sessions)),
    )
    check(soak, pending, resources)


async def _run_relay(
    soak: Soak, connector: ReferenceConnector, until: float, store: DedupeStore | None
) -> trio_relay.RelayStats:
    async def on_message(event: trio_relay.MessageEvent) -> None:
        await actors.handle_message(soak, event)

    async with trio_relay.open_relay(
        connector.url,
        auth=UpgradeAuth(GATEWAY_ID, soak.secret),
        on_message=on_message,
        config=soak_config(store, soak.dialer),
    ) as relay:
        # Requests (bursts included) live in their own nursery, so that stopping the
        # chaos never cancels one: each must end by its own deadline.
        async with trio.open_nursery() as requests:
            soak.requests = requests
            async with trio.open_nursery() as chaos:
                hit = Hit(soak, connector, relay, chaos, lambda: actors.spawn_burst(soak, relay))
                chaos.start_soon(injector, hit, until)
                chaos.start_soon(actors.burster, soak, relay, until)
                chaos.start_soon(actors.producer, soak, connector, until)
                chaos.start_soon(_report_progress, soak, relay, until)
                if soak.hostile_interval > 0:
                    chaos.start_soon(hostile, soak, connector, relay, until)
                for _ in range(soak.requesters):
                    requests.start_soon(actors.requester, soak, relay, soak.rng.getrandbits(32))
                await trio.sleep_until(until)
                soak.stop_requests = True
                chaos.cancel_scope.cancel()
            # Give them their deadline and more, then cancel: a request still running
            # then is reported as never returned, not waited on forever.
            requests.cancel_scope.deadline = trio.current_time() + soak.timeouts[1] + 5
        await _repair(connector)
        await _drain_deliveries(relay, connector)
        stats = relay.stats
    return stats


async def _report_progress(soak: Soak, relay: trio_relay.Relay, until: float) -> None:
    if soak.progress is None:
        return
    while trio.current_time() < until:
        await trio.sleep(min(30.0, max(until - trio.current_time(), 0.0)))
        soak.progress(
            f"[soak] {soak.flags.count} requests, {sum(soak.report.faults.values())} "
            f"faults, {soak.report.deliveries} deliveries, state {relay.state.value}"
        )


async def _repair(connector: ReferenceConnector) -> None:
    """Undo every lasting fault: the backlog must be able to drain."""
    connector.delay_results(0)
    for session in connector.sessions:
        session.resume()
    if not connector.listening:
        await connector.start()


async def _drain_deliveries(relay: trio_relay.Relay, connector: ReferenceConnector) -> None:
    """Wait until every buffered delivery is acked; a delivery whose handler failed comes
    back only on a replay, so force one (a 1012 close) when the backlog stalls. Bounded:
    what is left over shows up in the invariants."""
    with trio.move_on_after(60):
        while connector.pending(GATEWAY_ID):
            with trio.move_on_after(5):
                await relay.wait_connected()
            with trio.move_on_after(1.0):
                await connector.wait_until(lambda: not connector.pending(GATEWAY_ID))
            if connector.pending(GATEWAY_ID) and connector.current is not None:
                await connector.close(1012, "soak: replay the backlog")


async def _wait_sessions_over(connector: ReferenceConnector) -> None:
    with trio.move_on_after(5):
        await connector.wait_until(lambda: connector.current is None)


async def _settled(fds0: int, tasks0: int) -> tuple[int, int]:
    """Resources once back at their starting level, or after a grace period."""
    with trio.move_on_after(5):
        while _counts() != (fds0, tasks0):
            await trio.sleep(0.05)
    return _counts()


def run_soak(
    seconds: float,
    *,
    seed: int | None = None,
    requesters: int = 16,
    delivery_rate: float = 30.0,
    fault_interval: float = 0.75,
    timeouts: tuple[float, float] = (0.25, 2.0),
    progress: Callable[[str], None] | None = None,
    watchdog_grace: float = WATCHDOG_GRACE,
    dedupe: str | None = None,
    hostile_interval: float = 0.5,
    idempotency: bool = False,
) -> SoakReport:
    """Run the chaos soak for ``seconds`` of injected faults (plus a few seconds to drain
    and close) and return its report; ``report.ok`` says whether every invariant held.

    ``seed`` makes the choices of the harness repeatable (the network's timing is not);
    ``None`` picks one, printed in the report. ``fault_interval`` is the mean gap between
    faults; request timeouts are drawn uniformly from ``timeouts``. A run still going
    ``watchdog_grace`` seconds after the chaos ended is cancelled and reported wedged.
    ``hostile_interval``: mean seconds between hostile frames (see :mod:`.hostile`; 0:
    none). ``idempotency``: the connector honours idempotency keys, so the relay sends an
    ambiguous request again under its key (docs/protocol.md, "Idempotency keys").
    ``dedupe``: the relay's dedupe store, a Redis URL (``redis://host:port/0``) or a
    SQLite path; None keeps the default memory store. Must not be called from inside a
    Trio run.
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    soak = Soak(
        seconds,
        seed,
        requesters=requesters,
        delivery_rate=delivery_rate,
        fault_interval=fault_interval,
        timeouts=timeouts,
        progress=progress,
        watchdog_grace=watchdog_grace,
        dedupe=dedupe,
        hostile_interval=hostile_interval,
        idempotency=idempotency,
    )
    soak.report.dedupe = _masked(dedupe)

    def sent(message: bytes, returned: bool) -> None:
        soak.flags.mark_sent(message, ledger.WRITTEN if returned else ledger.ATTEMPTED)

    root = logging.getLogger()
    root.addHandler(soak.errors)
    try:
        # The relay dials through a tap: every frame the client writes is read back
        # for the nonces it carries (attempted, then written).
        soak.dialer = FaultDialer(tap=sent)
        with errors_visible():
            # Ctrl-C only where the main task waits: raised in the middle of an actor's
            # or the connector's step it was lost there, and the soak ran on.
            trio.run(_guarded, soak, restrict_keyboard_interrupt_to_checkpoints=True)
    finally:
        root.removeHandler(soak.errors)
    return soak.report


def _masked(dedupe: str | None) -> str:
    """How the report names the store: never with a password."""
    if dedupe is None:
        return "memory"
    parts = urlsplit(dedupe)
    if parts.password is None:
        return dedupe
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
