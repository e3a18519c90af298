"""Opening the socket: TCP with the keepalive options, TLS, then the WebSocket upgrade.

The TCP stream is opened here rather than by trio-websocket so that the keepalive
provider's options are on the socket before the first byte of the upgrade, and so that
a :class:`LivenessStream` can sit under the WebSocket and see every byte received.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import trio
import trio_websocket

from .._core.config import RelayConfig
from .liveness import LivenessStream


@dataclass(frozen=True)
class Endpoint:
    """Where to dial, split out of the normalised URL once per relay."""

    host: str
    port: int
    secure: bool
    resource: str

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        secure = parts.scheme == "wss"
        host = parts.hostname or ""
        resource = parts.path + (f"?{parts.query}" if parts.query else "")
        return cls(host, parts.port or (443 if secure else 80), secure, resource)

    @property
    def host_header(self) -> str:
        default_port = 443 if self.secure else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default_port else f"{host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        # Used in logs: host and port only, never user info or query strings.
        return f"{'wss' if self.secure else 'ws'}://{self.host_header}"


class UpgradeRefused(Exception):
    """The server answered the upgrade with an HTTP status instead of switching."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the connector refused the WebSocket upgrade with HTTP {status}")
        self.status = status


async def open_transport(endpoint: Endpoint, config: RelayConfig) -> LivenessStream:
    """TCP (+ TLS for ``wss``) with keepalive options applied, wrapped for liveness."""
    with trio.fail_after(config.connect_timeout):
        tcp = await trio.open_tcp_stream(endpoint.host, endpoint.port)
    try:
        config.keepalive.apply(tcp.socket)
        stream: trio.abc.Stream = tcp
        if endpoint.secure:
            context = config.ssl_context or ssl.create_default_context()
            tls = trio.SSLStream(tcp, context, server_hostname=endpoint.host)
            with trio.fail_after(config.handshake_timeout):
                await tls.do_handshake()
            stream = tls
    except BaseException:
        await trio.aclose_forcefully(tcp)
        raise
    return LivenessStream(stream)


async def upgrade(
    nursery: trio.Nursery,
    transport: LivenessStream,
    endpoint: Endpoint,
    config: RelayConfig,
    bearer: str | None,
) -> trio_websocket.WebSocketConnection:
    """The WebSocket upgrade over ``transport``; its reader task lives in ``nursery``."""
    headers = [(b"authorization", f"Bearer {bearer}".encode())] if bearer else []
    try:
        with trio.fail_after(config.handshake_timeout):
            return await trio_websocket.wrap_client_stream(
                nursery,
                transport,  # type: ignore[arg-type]  # any trio Stream works
                endpoint.host_header,
                endpoint.resource,
                extra_headers=headers,
                max_message_size=config.max_message_bytes,
                message_queue_size=64,
                receive_buffer_size=1 << 16,
            )
    except trio_websocket.ConnectionRejected as exc:
        raise UpgradeRefused(exc.status_code) from None
