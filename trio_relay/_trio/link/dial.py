"""The real dialer: TCP (happy eyeballs) with the keepalive options, an optional HTTP
CONNECT proxy, then TLS for ``wss``.

:func:`connect` is the default of ``RelayConfig(dialer=...)`` (the seam is described in
``trio_relay/_core/endpoint.py``). The TCP stream is opened here, not by a WebSocket
library, so that the keepalive provider's options (and ``TCP_NODELAY``, which
``trio.open_tcp_stream`` sets) are on the socket before the first byte of the upgrade.
"""

from __future__ import annotations

import ssl

import trio

from ..._core.config import Dialer, RelayConfig
from ..._core.endpoint import ByteStream, Endpoint
from .proxy import ProxyRefused, open_tunnel, proxy_for
from .stream import SocketStream, open_tcp

__all__ = ["ByteStream", "Dialer", "Endpoint", "ProxyRefused", "connect"]


async def connect(endpoint: Endpoint, config: RelayConfig) -> ByteStream:
    """Open the byte stream the WebSocket upgrade runs over (the caller bounds it)."""
    proxy = proxy_for(endpoint, config.proxy)
    host, port = (proxy.host, proxy.port) if proxy is not None else (endpoint.host, endpoint.port)
    # Our own stream (socket_stream.py): no scheduler turn for a read that finds bytes
    # or a write the kernel takes.
    tcp: SocketStream = await open_tcp(host, port)
    try:
        config.keepalive.apply(tcp.socket)
        stream: trio.abc.Stream = tcp
        if proxy is not None:
            await open_tunnel(tcp, endpoint, proxy)
        if endpoint.secure:
            context = config.ssl_context or _default_context()
            tls = trio.SSLStream(stream, context, server_hostname=endpoint.host)
            await tls.do_handshake()
            stream = tls
    except BaseException:
        await trio.aclose_forcefully(tcp)
        raise
    return stream


_context: ssl.SSLContext | None = None


def _default_context() -> ssl.SSLContext:
    # The system trust store, loaded once per process: loading it costs milliseconds
    # (and memory) that every redial would otherwise pay again.
    global _context
    if _context is None:
        _context = ssl.create_default_context()
    return _context
