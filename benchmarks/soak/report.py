"""What one soak run found: its figures, and a verdict per invariant."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio_relay

from .faults import FAULTS
from .settings import BURST_BYTES

__all__ = ["Invariant", "SoakReport", "compare"]


@dataclass(frozen=True)
class Invariant:
    name: str
    ok: bool
    detail: str


@dataclass
class SoakReport:
    """Figures and verdicts of one soak run; ``ok`` is true when every invariant held."""

    seconds: float
    seed: int
    wall_time: float = 0.0
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    """Request outcomes by kind: ``success``, ``declined`` (the connector's refusal),
    ``definite:<code>`` (``definite:latched``: a chat latched after a decline, answered
    by the relay without a frame), ``ambiguous:<code>``."""
    faults: Counter[str] = field(default_factory=Counter)
    faults_skipped: int = 0
    bursts: int = 0
    deliveries: int = 0
    handled: int = 0
    handler_failures_injected: int = 0
    hostile: Counter[str] = field(default_factory=Counter)
    """Hostile frames sent, by kind (see :mod:`.hostile`)."""
    dedupe: str = "memory"
    """The relay's dedupe store (a Redis URL has its password masked)."""
    max_overshoot: float = 0.0
    direct_writes: int = 0
    """The relay's direct writes (``send_nowait``, a request writing its own frame) that
    the soak's ``FaultDialer`` streams took: the production write path, under chaos."""
    awaited_writes: int = 0
    """Writes through ``send_all`` (upgrades, the writer task's batches)."""
    idempotency: bool = False
    """The mode: the connector honoured idempotency keys (and the relay resent under
    them)."""
    resent: int = 0
    """Requests written more than once (``Outcome.attempts > 1``)."""
    duplicates: int = 0
    """Messages the chat shows twice: carried out a second time."""
    lost: int = 0
    """Messages reported sent (success) that the chat does not show."""
    ambiguous_carried: int = 0
    """Ambiguous outcomes whose message the chat shows (a blind retry would post it
    twice)."""
    ambiguous_not_carried: int = 0
    """Ambiguous outcomes whose message the chat does not show (no retry loses it)."""
    ambiguous_early: int = 0
    """Ambiguous outcomes that came before their request's deadline."""
    relay_stats: trio_relay.RelayStats | None = None
    resources: dict[str, tuple[float, float]] = field(default_factory=dict)
    invariants: list[Invariant] = field(default_factory=list)

    @property
    def ambiguous(self) -> int:
        return sum(v for k, v in self.outcomes.items() if k.startswith("ambiguous:"))

    @property
    def ok(self) -> bool:
        return bool(self.invariants) and all(inv.ok for inv in self.invariants)

    def render(self) -> str:
        """The figures and the invariant table, as printed by ``trio-relay soak``."""
        out: list[str] = []
        rate = self.requests / self.wall_time if self.wall_time else 0.0
        out.append(
            f"trio-relay soak: {self.seconds:g} s of chaos (seed {self.seed}), "
            f"{self.wall_time:.1f} s wall in all"
        )
        mode = "on" if self.idempotency else "off"
        out.append(f"  idempotency  {mode}")
        out.append(f"  requests     {self.requests} ({rate:.0f}/s), {self.resent} sent again")
        for kind, count in sorted(self.outcomes.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"    {kind:<34} {count}")
        out.append(
            f"  faults       {sum(self.faults.values())} injected "
            f"({self.faults_skipped} skipped: no session to hit)"
        )
        for kind in FAULTS:
            out.append(f"    {kind:<34} {self.faults[kind]}")
        if self.hostile:
            out.append(f"  hostile      {sum(self.hostile.values())} frames sent")
            for kind, count in sorted(self.hostile.items()):
                out.append(f"    {kind:<34} {count}")
        out.append(f"  bursts       {self.bursts} (100-400 requests of {BURST_BYTES} B at once)")
        out.append(
            f"  deliveries   {self.deliveries} buffered, {self.handled} handled, "
            f"{self.handler_failures_injected} first attempts failed on purpose; dedupe "
            f"store: {self.dedupe}"
        )
        out.append(
            f"  writes       {self.direct_writes} direct (send_nowait), "
            f"{self.awaited_writes} through send_all"
        )
        out += self._stats_lines()
        for name, (before, after) in self.resources.items():
            out.append(f"  {name:<12} {before:g} -> {after:g}")
        out.append(f"  worst lateness past a deadline: {self.max_overshoot * 1000:.1f} ms")
        out.append(
            f"  chat         {self.duplicates} shown twice, {self.lost} lost; ambiguous: "
            f"{self.ambiguous} ({self.ambiguous_carried} in the chat, "
            f"{self.ambiguous_not_carried} not; {self.ambiguous_early} before their deadline)"
        )
        out.append("")
        width = max((len(inv.name) for inv in self.invariants), default=10)
        out.append(f"  {'invariant':<{width}}  result  detail")
        out.append(f"  {'-' * width}  ------  ------")
        for inv in self.invariants:
            out.append(f"  {inv.name:<{width}}  {'ok' if inv.ok else 'FAILED':<6}  {inv.detail}")
        out.append("")
        out.append("soak: PASSED" if self.ok else "soak: FAILED")
        return "\n".join(out)

    def _stats_lines(self) -> list[str]:
        stats = self.relay_stats
        if stats is None:
            return []
        drops = ", ".join(f"{k} {v}" for k, v in sorted(stats.drops.items()))
        return [
            f"  relay        dials {stats.dials}, dial failures {stats.dial_failures}, "
            f"connects {stats.connects}",
            f"    drops: {drops or 'none'}",
            f"    inbound: delivered {stats.delivered}, replays dropped "
            f"{stats.replays_dropped}, handler failures {stats.handler_failures}, "
            f"acks sent {stats.acks_sent}, dead letters {stats.dead_letters}",
            f"    frames: sent {stats.frames_sent} in {stats.messages_sent} messages, "
            f"received {stats.frames_received}, rejected {stats.frames_rejected}",
        ]


def compare(reports: list[SoakReport]) -> str:
    """One line per mode: what a user of the chat would see."""
    head = (
        f"  {'idempotency':<12} {'requests':>9} {'ambiguous':>10} {'at deadline':>12} "
        f"{'shown twice':>12} {'lost':>5} {'sent again':>11}"
    )
    lines = ["trio-relay soak: the same seeded faults in both modes", head]
    for r in reports:
        at_deadline = r.ambiguous - r.ambiguous_early
        lines.append(
            f"  {'on' if r.idempotency else 'off':<12} {r.requests:>9} {r.ambiguous:>10} "
            f"{at_deadline:>12} {r.duplicates:>12} {r.lost:>5} {r.resent:>11}"
        )
    return "\n".join(lines)
