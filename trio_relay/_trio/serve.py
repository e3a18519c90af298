"""One connection's life: dial, upgrade, handshake, serve until it ends.

The supervisor loop (``supervisor.py``) calls :func:`serve_connection` once per dial and
decides from the returned :class:`ConnectionEnd` what to do next; this module knows
nothing of backoff or revocation. The connection nursery opened here holds
trio-websocket's reader and our reader, writer and pinger, and is cancelled as a whole
when the socket dies; the transport is closed on every path out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio
import trio_websocket
from wsproto.utilities import LocalProtocolError

from .._core.close import AUTH_CLOSE_CODE, ConnectionEnd
from .._core.config import Identity, RelayConfig
from .._core.stats import RelayStats
from .connection import Connection, InboundSink
from .dial import Endpoint, UpgradeRefused, open_transport, upgrade

logger = logging.getLogger("trio_relay")

DIAL_ERRORS = (
    OSError,  # refused, unreachable, TLS failures (ssl.SSLError)
    trio.TooSlowError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio_websocket.HandshakeError,
    trio_websocket.ConnectionClosed,
)


@dataclass(frozen=True)
class ConnectionHooks:
    """What the relay wants to hear about a connection, all called synchronously."""

    on_open: Callable[[Connection], None]
    """The socket is upgraded and its tasks run (acks may use it already)."""
    on_up: Callable[[Connection], None]
    """The handshake is done: requests may use it."""
    on_end: Callable[[Connection], None]
    """It ended (called by whichever task saw it first)."""
    on_inbound: InboundSink


async def serve_connection(
    *,
    endpoint: Endpoint,
    config: RelayConfig,
    stats: RelayStats,
    identities: Sequence[Identity],
    mint_token: Callable[[], str | None],
    hooks: ConnectionHooks,
) -> ConnectionEnd:
    """Dial once and serve the connection until it ends; never raises for the
    network's faults (they come back as the :class:`ConnectionEnd`)."""
    stats.dials += 1
    try:
        transport = await open_transport(endpoint, config)
    except DIAL_ERRORS as exc:
        return _dial_failed(endpoint, stats, f"connect failed: {_describe(exc)}", None)
    conn: Connection | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                # Minted at the last moment: a token made before a slow connect (or a
                # suspend) could be stale by the time the upgrade carries it.
                ws = await upgrade(nursery, transport, endpoint, config, mint_token())
            except UpgradeRefused as exc:
                nursery.cancel_scope.cancel()
                # An HTTP-level refusal of our credentials reads like a 4401.
                code = AUTH_CLOSE_CODE if exc.status in (401, 403) else None
                return _dial_failed(endpoint, stats, str(exc), code)
            except DIAL_ERRORS as exc:
                nursery.cancel_scope.cancel()
                cause = f"upgrade failed: {_describe(exc)}"
                return _dial_failed(endpoint, stats, cause, None)
            conn = Connection(
                ws=ws,
                transport=transport,
                nursery=nursery,
                config=config,
                stats=stats,
                on_inbound=hooks.on_inbound,
                on_end=hooks.on_end,
            )
            conn.start()
            hooks.on_open(conn)
            if await conn.handshake(identities, config.handshake_timeout):
                hooks.on_up(conn)
            # Connection.end() cancels this nursery, this wait included.
            await conn.ended.wait()
    except BaseExceptionGroup as group:
        # trio-websocket's reader task dies with wsproto's LocalProtocolError when the
        # peer pings while our close is under way (no Pong may follow our Close). That
        # ends this connection, never the relay.
        if conn is None or group.split(LocalProtocolError)[1] is not None:
            raise
        conn.end(f"protocol error: {group.exceptions[0]}")
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(transport)
    return _connection_over(endpoint, conn)


def _connection_over(endpoint: Endpoint, conn: Connection) -> ConnectionEnd:
    end = conn.end_info
    assert end is not None, "the connection nursery exits only through Connection.end"
    logger.info(
        "relay %s: connection ended after %.3f s: %s (code %s, reason %r)",
        endpoint,
        trio.current_time() - conn.opened_at,
        end.cause,
        end.code,
        end.reason,
    )
    return end


def _dial_failed(
    endpoint: Endpoint, stats: RelayStats, cause: str, code: int | None
) -> ConnectionEnd:
    reason = "unauthorized" if code == AUTH_CLOSE_CODE else None
    stats.dial_failures += 1
    stats.last_close_code = code
    stats.last_close_reason = reason
    # Not logged here: the supervisor logs each failed dial once, with its next attempt.
    return ConnectionEnd(cause, code, reason)


def _describe(exc: BaseException) -> str:
    # Follow the explicit cause: a failed TLS verification reaches us as a bare
    # BrokenResourceError whose __cause__ (ssl.SSLCertVerificationError) says why.
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 3:
        text = str(current)
        parts.append(f"{type(current).__name__}: {text}" if text else type(current).__name__)
        current = current.__cause__
    return ", caused by ".join(parts)
