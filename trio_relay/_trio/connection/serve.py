"""One connection's life: dial, upgrade, handshake, serve until it ends.

The supervisor (``supervisor.py``) calls `serve_connection` once per dial and decides from the
returned `ConnectionEnd` what to do next; this module knows nothing of backoff or
revocation. Every way a dial can fail — refused, unreachable, TLS, a proxy's refusal,
any HTTP answer at the upgrade, a bad ``Sec-WebSocket-Accept``, EOF or a reset midway —
comes back as a failed dial's ``ConnectionEnd``, logged in plain words, never as an
exception. The connection nursery opened here holds the connection's tasks and is
cancelled as a whole when the socket dies; the stream is closed on every path out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from ..._core.close import AUTH_CLOSE_CODE, ConnectionEnd
from ..._core.config import Dialer, Identity
from ..._core.dial_failure import Refusal, describe_error, proxy_refusal
from ..._core.endpoint import Endpoint
from ..._core.settings import ConnectionSettings, DialSettings
from ..._core.stats import RelayStats
from ..._core.telemetry import Telemetry
from ..link.dial import ProxyRefused
from ..link.stream import checked
from ..link.upgrade import upgrade
from ..link.websocket import STREAM_ERRORS, UpgradeFailed, upgrade_headers
from .connection import Connection, InboundSink

logger = logging.getLogger("trio_relay")

DIALING = "relay %s: dialing (dial %d)"
"""Logged at DEBUG as each dial starts."""

DIAL_ERRORS = (*STREAM_ERRORS, trio.TooSlowError)
"""What a dialer raises for the network's faults (``ssl.SSLError`` is an ``OSError``)."""


@dataclass(frozen=True, slots=True)  # no __dict__: one per relay
class ConnectionHooks:
    """What the relay wants to hear about a connection, all called synchronously."""

    on_open: Callable[[Connection], None]
    """The socket is upgraded and its tasks run (acks may use it already)."""
    on_up: Callable[[Connection], None]
    """The first descriptor arrived: requests may use it (called by the reader)."""
    on_end: Callable[[Connection], None]
    """It ended (called by whichever task saw it first)."""
    on_inbound: InboundSink


async def serve_connection(
    *,
    endpoint: Endpoint,
    dial: DialSettings,
    connection: ConnectionSettings,
    dialer: Dialer,
    telemetry: Telemetry | None = None,
    stats: RelayStats,
    identities: Sequence[Identity],
    mint_token: Callable[[], str | None],
    hooks: ConnectionHooks,
) -> ConnectionEnd:
    """Dial once and serve the connection until it ends; never raises for the
    network's faults (they come back as the `ConnectionEnd`)."""
    stats.dials += 1
    logger.debug(DIALING, endpoint, stats.dials)
    # Cancel scopes, not trio.fail_after: that is a generator-based context manager,
    # 9,000 instructions a use more, twice a dial.
    try:
        with trio.CancelScope(deadline=trio.current_time() + dial.connect_timeout) as bound:
            stream = checked(await dialer(endpoint))
    except ProxyRefused as exc:
        # Before DIAL_ERRORS (it is an OSError): a 407 needs a person, not five quiet redials.
        cause = f"connect failed: {describe_error(exc)}"
        return _dial_failed(endpoint, stats, proxy_refusal(exc.status, cause))
    except DIAL_ERRORS as exc:
        cause = f"connect failed: {describe_error(exc)}"
        return _dial_failed(endpoint, stats, Refusal(cause), errno=_errno(exc))
    if bound.cancelled_caught:
        cause = f"connect failed: timed out after {dial.connect_timeout:g} s"
        return _dial_failed(endpoint, stats, Refusal(cause))
    conn: Connection | None = None
    try:
        try:
            with trio.CancelScope(deadline=trio.current_time() + dial.handshake_timeout) as bound:
                ws = await upgrade(
                    stream,
                    endpoint,
                    # Minted at the last moment: a token made before a slow connect (or
                    # a suspend) could be stale by the time the upgrade carries it. Not
                    # a local: this frame lives as long as the connection, and should
                    # hold neither the bearer token nor the bytes.
                    headers=upgrade_headers(
                        mint_token(), dial.user_agent, dial.extra_headers
                    ),
                    max_message_bytes=dial.max_message_bytes,
                    compression=dial.compression,
                )
        except UpgradeFailed as exc:
            return _dial_failed(endpoint, stats, exc.refusal, exc.status)
        except DIAL_ERRORS as exc:
            cause = f"upgrade failed: {describe_error(exc, handshake_done=True)}"
            return _dial_failed(endpoint, stats, Refusal(cause), errno=_errno(exc))
        if bound.cancelled_caught:
            cause = f"upgrade failed: no answer within {dial.handshake_timeout:g} s"
            return _dial_failed(endpoint, stats, Refusal(cause))
        async with trio.open_nursery() as nursery:
            conn = Connection(
                ws=ws,
                nursery=nursery,
                settings=connection,
                telemetry=telemetry,
                stats=stats,
                on_inbound=hooks.on_inbound,
                on_up=hooks.on_up,
                on_end=hooks.on_end,
            )
            conn.start()
            hooks.on_open(conn)
            if await conn.handshake(identities, dial.handshake_timeout):  # (on_up called)
                if not conn.has_all_descriptors:
                    nursery.start_soon(
                        _watch_descriptors, conn, dial.handshake_timeout, stats, endpoint
                    )
                await conn.run_timer()
            # Connection.end() cancels this nursery, this wait included.
            await conn.wait_ended()
    finally:
        stream.close()  # no checkpoint: the redial goes on in this same turn
    return _connection_over(endpoint, conn)


async def _watch_descriptors(
    conn: Connection, handshake_timeout: float, stats: RelayStats, endpoint: Endpoint
) -> None:
    # Up on the first descriptor; the rest are added as they come. Whoever is still
    # without one when the handshake's time is up is named, once.
    with trio.move_on_at(conn.opened_at + handshake_timeout):
        await conn.wait_all_descriptors()
    missing = conn.missing_descriptors()
    if missing and conn.is_open:
        stats.missing_descriptors = missing
        logger.warning(
            "relay %s: no descriptor for %s within %g s; requests for them are limited "
            "to the legacy ops (send, edit, typing, follow_up)",
            endpoint,
            ", ".join(missing),
            handshake_timeout,
            extra={"cause": "missing descriptors"},
        )


def _connection_over(endpoint: Endpoint, conn: Connection | None) -> ConnectionEnd:
    assert conn is not None, "only a served connection gets here"
    end = conn.end_info
    assert end is not None, "the connection nursery exits only through Connection.end"
    # A link that never came up is a failed dial: the supervisor logs it (once, with
    # its next attempt), so this line is only for debugging then.
    level = logging.INFO if end.up_for is not None else logging.DEBUG
    if logger.isEnabledFor(level):  # (else its extra fields are not built)
        logger.log(
            level,
            "relay %s: connection ended after %.3f s: %s (code %s, reason %r)",
            endpoint,
            trio.current_time() - conn.opened_at,
            end.cause,
            end.code,
            end.reason,
            extra={"cause": end.cause, "close_code": end.code},
        )
    return end


def _errno(exc: BaseException) -> int | None:
    # A Trio error raised from an OSError carries the OS's number on its cause.
    for error in (exc, exc.__cause__):
        number = getattr(error, "errno", None)
        if isinstance(number, int):
            return number
    return None


def _dial_failed(
    endpoint: Endpoint,
    stats: RelayStats,
    why: Refusal,
    status: int | None = None,
    *,
    errno: int | None = None,
) -> ConnectionEnd:
    code = AUTH_CLOSE_CODE if why.auth else None
    reason = "unauthorized" if why.auth else None
    stats.dial_failures += 1
    stats.last_close_code = code
    stats.last_close_reason = reason
    stats.last_dial_failure = why.cause
    # Not logged here: the supervisor logs each failed dial once (at WARNING when it
    # carries advice), with its next attempt.
    return ConnectionEnd(
        why.cause,
        code,
        reason,
        http_status=status,
        retry_after=why.retry_after,
        advice=why.advice,
        errno=errno,
    )
