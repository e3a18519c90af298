"""The soak's fixed choices: who the relay is, its configuration, and the slack each
invariant allows."""

from __future__ import annotations

import secrets

from trio_relay import DedupeStore, RedisDedupeStore, RelayConfig, SqliteDedupeStore
from trio_relay._core.config import Dialer

__all__ = [
    "BURST_BYTES",
    "CHATS",
    "DEADLINE_SLACK",
    "GATEWAY_ID",
    "IDEMPOTENCY_WINDOW",
    "MESSAGE_BYTES",
    "dedupe_store",
    "PLATFORM",
    "WATCHDOG_GRACE",
    "memory_tolerance",
    "soak_config",
]

GATEWAY_ID = "soak-gateway"
PLATFORM = "relay"
CHATS = 8

IDEMPOTENCY_WINDOW = 300.0
"""The connector's idempotency window in the mode with keys: far longer than any
request's deadline (at most 2 s), so every resend finds its first attempt."""

DEADLINE_SLACK = 0.25
"""Seconds a request may end after its deadline before it counts as late: the time the
scheduler takes to run the woken task on a busy, real clock (typically well under 10 ms;
the report prints the worst seen)."""

WATCHDOG_GRACE = 180.0
"""Seconds past the chaos a run may take (drain, close, checks) before it is declared
wedged and cancelled."""

MESSAGE_BYTES = 64 << 10
"""Small enough that bursts span several WebSocket messages on both sides."""

BURST_BYTES = 30_000
"""Content size of each request of a burst (see :func:`.actors.burst`)."""

MEMORY_SLACK = 16 << 20
MEMORY_PER_SESSION = 32 << 10


def memory_tolerance(sessions: int) -> int:
    """Resident-memory growth tolerated between opening and closing the relay, both
    measured after a full garbage collection and ``malloc_trim(0)``.

    The reference connector keeps every ``Session`` it accepted (its records), and those
    pin partly used allocator arenas: ``MEMORY_PER_SESSION`` each, measured at about a
    fifth of that. ``MEMORY_SLACK`` covers the rest of the harness's own records (two
    bytes per request) and fragmentation. A leak of the relay's per-connection objects is
    caught exactly by the object census; this bound catches a leak *per request* of more
    than a few dozen bytes over a long run."""
    return MEMORY_SLACK + MEMORY_PER_SESSION * sessions


def dedupe_store(dedupe: str | None) -> DedupeStore | None:
    """The store ``--dedupe`` names: None (the default memory store), a ``redis://`` /
    ``rediss://`` / ``unix://`` URL (keys under a prefix of their own, so a run never sees
    another's), or a SQLite file path."""
    if dedupe is None or dedupe == "memory":
        return None
    if dedupe.split(":", 1)[0] in ("redis", "rediss", "unix"):
        prefix = f"trio-relay-soak:{secrets.token_hex(6)}:"
        # A short lease: a claim the relay dropped with its connection frees up soon.
        return RedisDedupeStore(dedupe, prefix=prefix, lease=5.0, ttl=3600.0)
    return SqliteDedupeStore(dedupe)


def soak_config(store: DedupeStore | None = None, dialer: Dialer | None = None) -> RelayConfig:
    """The relay's configuration during the soak: the contract's rules, on a timescale
    where faults are found and recovered from in well under a second. ``dialer``: the
    write tap (``FaultDialer(tap=...)``)."""
    return RelayConfig(
        dialer=dialer,
        dedupe_store=store,
        ping_interval=0.25,
        ping_timeout=1.0,
        handshake_timeout=1.0,
        connect_timeout=1.0,
        backoff_initial=0.02,
        backoff_max=0.25,
        backoff_stable_after=1.0,
        dormant_redial_delay=0.05,
        drain_timeout=1.0,
        close_timeout=0.5,
        max_message_bytes=MESSAGE_BYTES,
        max_line_bytes=MESSAGE_BYTES,
    )
