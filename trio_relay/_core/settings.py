"""The parts of [`RelayConfig`][trio_relay.RelayConfig] each subsystem uses.

``RelayConfig`` stays the one flat, public place to configure a relay. ``open_relay``
derives these small frozen parts from it once, and each part of the shell is given only
its own: a connection cannot read a dedupe setting, nor the inbound pipeline a
timeout, and a reader of a module sees at its signature which settings steer it.

Each part is a value: relays whose settings are equal share one object (an idle relay
holds its parts for its whole life; a fleet of relays made from one config holds them
once, not once per relay, about 300 bytes each).

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TypeVar

from .config import RelayConfig
from .dedupe_store import DedupeStore
from .keepalive import KeepaliveConfig

__all__ = ["ConnectionSettings", "DialSettings", "InboundSettings", "RoutesSettings"]

_Part = TypeVar("_Part")
_SHARED: dict[object, object] = {}
"""Each distinct part made, by itself (equal parts hash equal); few: one per config."""
_MAX_SHARED = 256


def _shared(part: _Part, *, plain: bool = True) -> _Part:
    # Only parts of plain values are kept (``plain``): one that holds the caller's own
    # object (a dedupe store, an SSL context) would keep it alive after its relays are
    # gone. Bounded: a process that makes configs without end (a test suite) gets fresh
    # parts beyond the bound, never a growing table.
    if not plain:
        return part
    found = _SHARED.get(part)
    if found is not None:
        return found  # type: ignore[return-value]
    if len(_SHARED) < _MAX_SHARED:
        _SHARED[part] = part
    return part


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """What one connection uses: its keepalive, its close, its limits."""

    ping_interval: float
    ping_timeout: float
    close_timeout: float
    max_queued_frames: int
    max_message_bytes: int
    max_line_bytes: int

    @classmethod
    def from_config(cls, config: RelayConfig) -> ConnectionSettings:
        return _shared(
            cls(
                ping_interval=config.ping_interval,
                ping_timeout=config.ping_timeout,
                close_timeout=config.close_timeout,
                max_queued_frames=config.max_queued_frames,
                max_message_bytes=config.max_message_bytes,
                max_line_bytes=config.max_line_bytes,
            )
        )


@dataclass(frozen=True, slots=True)
class DialSettings:
    """What one dial uses, from the connect to the upgrade's answer."""

    connect_timeout: float
    handshake_timeout: float
    """Bounds the upgrade, and then the wait for the first descriptor."""
    max_message_bytes: int
    compression: bool
    user_agent: str | None
    extra_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """(Not in the repr: a header may carry a credential.)"""

    @classmethod
    def from_config(cls, config: RelayConfig) -> DialSettings:
        return _shared(
            cls(
                connect_timeout=config.connect_timeout,
                handshake_timeout=config.handshake_timeout,
                max_message_bytes=config.max_message_bytes,
                compression=config.compression,
                user_agent=config.user_agent,
                extra_headers=config.extra_headers,
            )
        )


@dataclass(frozen=True, slots=True)
class InboundSettings:
    """What the inbound pipeline uses: its bounds, its retries, its dedupe."""

    max_concurrent_handlers: int
    max_inbound_queue: int
    max_delivery_attempts: int
    dedupe_size: int
    dedupe_path: str | None = None
    dedupe_store: DedupeStore | None = field(default=None, repr=False)
    """(Not in the repr: a store's own repr is its business, and may name a server.)"""
    interrupt_cancels_turn: bool | None = None
    """As in ``RelayConfig``: ``None`` decides by whether an ``on_interrupt`` is given."""

    @classmethod
    def from_config(cls, config: RelayConfig) -> InboundSettings:
        return _shared(
            cls(
                max_concurrent_handlers=config.max_concurrent_handlers,
                max_inbound_queue=config.max_inbound_queue,
                max_delivery_attempts=config.max_delivery_attempts,
                dedupe_size=config.dedupe_size,
                dedupe_path=config.dedupe_path,
                dedupe_store=config.dedupe_store,
                interrupt_cancels_turn=config.interrupt_cancels_turn,
            ),
            plain=config.dedupe_store is None,
        )


@dataclass(frozen=True, slots=True)
class RoutesSettings:
    """What the connector's HTTP routes (media, policy) use."""

    connect_timeout: float
    stall_timeout: float
    """``media_stall_timeout``: the longest wait for the next byte of a transfer."""
    media_max_bytes: int
    keepalive: KeepaliveConfig
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: RelayConfig) -> RoutesSettings:
        return _shared(
            cls(
                connect_timeout=config.connect_timeout,
                stall_timeout=config.media_stall_timeout,
                media_max_bytes=config.media_max_bytes,
                keepalive=config.keepalive,
                ssl_context=config.ssl_context,
            ),
            plain=config.ssl_context is None,
        )
