"""The promises the soak checks once the relay closed, each one verdict.

:func:`check` reads the ledger of flags (:mod:`.ledger`), the delivery counts, the
relay's stats and the resources measured before and after, and appends one
:class:`.report.Invariant` per promise to the report.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import ledger
from .report import Invariant
from .settings import DEADLINE_SLACK
from .state import Soak

__all__ = ["Resources", "check", "relay_objects"]

_Add = Callable[[str, bool, str], None]
"""Append one verdict: (invariant, held, detail)."""


def relay_objects() -> Counter[str]:
    """Live objects of the relay's per-connection types: what a leak would multiply.

    The ``Relay`` handle itself is left out on purpose: its caller may keep it (and so
    may a log handler holding a handler failure's traceback, as pytest's does)."""
    from trio_relay._core.protocol import RelayProtocol, Request
    from trio_relay._trio.connection.connection import Connection
    from trio_relay._trio.link.websocket import WebSocket

    kinds: tuple[type, ...] = (Connection, RelayProtocol, Request, WebSocket)
    gc.collect()
    found: Counter[str] = Counter()
    for obj in gc.get_objects():
        # type(), never isinstance(): isinstance reads obj.__class__, and a lazy proxy
        # (openai's module-level resources) builds what it stands for when asked, which
        # cost the soak 50 MiB of RSS whenever openai had been imported.
        kind = type(obj)
        if issubclass(kind, kinds):
            found[kind.__name__] += 1
    return found


@dataclass(frozen=True)
class Resources:
    """Before (opening the relay) and after (closing it)."""

    fds: tuple[int, int]
    tasks: tuple[int, int]
    objects: tuple[Counter[str], Counter[str]]
    rss_growth: int
    rss_tolerance: int


@dataclass
class _Tally:
    no_outcome: int = 0
    definite_received: int = 0
    definite_written: int = 0
    success_unanswered: int = 0
    ambiguous_unwritten: int = 0
    lost: int = 0
    ambiguous_carried: int = 0
    ambiguous_not_carried: int = 0


def _tally(flags: ledger.Flags) -> _Tally:
    tally = _Tally()
    data = memoryview(flags.data)[: flags.count]
    for value in data:
        if not value & ledger.FINISHED:
            tally.no_outcome += 1
        if value & ledger.DEFINITE:
            tally.definite_received += bool(value & ledger.RECEIVED)
            tally.definite_written += bool(value & ledger.WRITTEN)
        if value & ledger.SUCCESS and not value & ledger.ANSWERED:
            tally.success_unanswered += 1
        if value & ledger.AMBIGUOUS and not value & ledger.ATTEMPTED:
            tally.ambiguous_unwritten += 1
        if value & ledger.SUCCESS and not value & ledger.CARRIED:
            tally.lost += 1
        if value & ledger.AMBIGUOUS:
            if value & ledger.CARRIED:
                tally.ambiguous_carried += 1
            else:
                tally.ambiguous_not_carried += 1
    data.release()
    return tally


def check(soak: Soak, pending: Sequence[str], resources: Resources) -> None:
    report = soak.report
    flags = soak.flags
    report.requests = flags.count
    report.handled = sum(1 for n in soak.handled if n)
    t = _tally(flags)

    def add(name: str, ok: bool, detail: str) -> None:
        report.invariants.append(Invariant(name, ok, detail))

    add(
        "every request got exactly one outcome",
        t.no_outcome == 0 and soak.doubles == 0,
        f"{flags.count - t.no_outcome} of {flags.count} returned; {t.no_outcome} never "
        f"returned, {soak.doubles} twice",
    )
    add(
        "no outcome later than its deadline",
        soak.late == 0,
        f"{soak.late} later than {DEADLINE_SLACK * 1000:.0f} ms past it; worst "
        f"{report.max_overshoot * 1000:+.1f} ms",
    )
    definite = sum(v for k, v in report.outcomes.items() if k.startswith("definite:"))
    add(
        "no definite failure the connector received",
        t.definite_received == 0 and t.definite_written == 0,
        f"{definite} definite failures: {t.definite_received} received by the "
        f"connector, {t.definite_written} written",
    )
    successes = report.outcomes["success"]
    add(
        "no success the connector did not answer",
        t.success_unanswered == 0 and soak.mismatched == 0,
        f"{successes} successes: {t.success_unanswered} unanswered, "
        f"{soak.mismatched} answers matched to the wrong request",
    )
    ambiguous = sum(v for k, v in report.outcomes.items() if k.startswith("ambiguous:"))
    add(
        "ambiguous only where the frame was written",
        t.ambiguous_unwritten == 0,
        f"{ambiguous} ambiguous: {t.ambiguous_unwritten} never handed to the socket",
    )
    report.duplicates, report.lost = soak.duplicates, t.lost
    report.ambiguous_carried = t.ambiguous_carried
    report.ambiguous_not_carried = t.ambiguous_not_carried
    report.ambiguous_early = soak.ambiguous_early
    add(
        "no message carried out twice",
        soak.duplicates == 0,
        f"{soak.duplicates} shown twice in the chat",
    )
    add(
        "no success the chat does not show",
        t.lost == 0,
        f"{successes} successes: {t.lost} absent from the chat",
    )
    if soak.idempotency:
        add(
            "with idempotency keys, ambiguous only when the deadline ran out",
            soak.ambiguous_early == 0,
            f"{ambiguous} ambiguous: {soak.ambiguous_early} before their deadline",
        )
    if soak.dialer is not None:
        report.direct_writes = soak.dialer.direct_writes
        report.awaited_writes = soak.dialer.awaited_writes
        add(
            "requests took the direct write under chaos",
            report.direct_writes > 0,
            f"{report.direct_writes} direct writes, {report.awaited_writes} through send_all",
        )
    if soak.hostile_interval > 0:
        _hostile(soak, add)
    _deliveries(soak, pending, add)
    _resources(resources, add)
    first = f": {soak.errors.first}" if soak.errors.first else ""
    add("nothing logged at ERROR", soak.errors.count == 0, f"{soak.errors.count} records{first}")
    add(
        "progress made",
        successes > 0 and report.handled > 0,
        f"{successes} successes, {report.handled} deliveries handled",
    )


def _hostile(soak: Soak, add: _Add) -> None:
    sent = soak.report.hostile
    taken = soak.forged_taken
    add(
        "no forged result taken before its frame left",
        taken["early"] == 0,
        f"{sent['forged_early_result']} forged for predicted ids: {taken['early']} taken "
        f"early, {taken['sent']} taken for frames already sent",
    )
    add(
        "no result with NaN taken",
        taken["nan"] == 0,
        f"{sent['nan_result']} sent for requests in progress: {taken['nan']} taken",
    )
    add(
        "no descriptor taken for a platform never said hello to",
        soak.ghost_descriptors_taken == 0,
        f"{sent['unknown_platform_descriptor']} sent: held {soak.ghost_descriptors_taken} "
        "times",
    )


def _deliveries(soak: Soak, pending: Sequence[str], add: _Add) -> None:
    report = soak.report
    twice = sum(1 for n in soak.handled if n > 1)
    never = sum(1 for n in soak.handled if n == 0)
    dead = report.relay_stats.dead_letters if report.relay_stats else 0
    add(
        "every buffered delivery handled exactly once",
        twice == 0 and never == 0 and dead == 0,
        f"{report.deliveries} buffered: {never} never handled, {twice} more than "
        f"once, {dead} dead-lettered",
    )
    add(
        "every buffered delivery acknowledged",
        not pending,
        f"{len(pending)} still unacknowledged at the connector",
    )


def _resources(r: Resources, add: _Add) -> None:
    add("file descriptors back to the start", r.fds[1] <= r.fds[0], f"{r.fds[0]} -> {r.fds[1]}")
    add("tasks back to the start", r.tasks[1] <= r.tasks[0], f"{r.tasks[0]} -> {r.tasks[1]}")
    leaked = r.objects[1] - r.objects[0]
    add(
        "memory: no connection object outlives the relay",
        not leaked,
        ", ".join(f"{k} {v}" for k, v in sorted(leaked.items())) or "none alive",
    )
    add(
        "memory: resident size back near the start",
        r.rss_growth <= r.rss_tolerance,
        f"{r.rss_growth / 2**20:+.1f} MiB (tolerance {r.rss_tolerance / 2**20:.0f} MiB)",
    )
