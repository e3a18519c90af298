"""The real dialer: TCP (happy eyeballs) with the keepalive options, an optional HTTP
CONNECT proxy, then TLS for ``wss``.

`TcpDialer` is the default of ``RelayConfig(dialer=...)`` (the seam is described
in ``trio_relay/_core/endpoint.py``), built from the config once, when the relay opens.
The TCP stream is opened here, not by a WebSocket library, so that the keepalive
provider's options (and ``TCP_NODELAY``, which ``trio.open_tcp_stream`` sets) are on the
socket before the first byte of the upgrade.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from socket import TCP_NODELAY

from ..._core.config import DEFAULT_KEEPALIVE, Dialer, RelayConfig
from ..._core.endpoint import ByteStream, Endpoint
from ..._core.keepalive import KeepaliveConfig, SocketOption
from .proxy import Proxy, ProxyRefused, open_tunnel, proxy_for
from .stream import SocketStream, TLSStream, open_tcp

__all__ = ["ByteStream", "Dialer", "Endpoint", "ProxyRefused", "TcpDialer"]


@dataclass(frozen=True, slots=True)
class TcpDialer:
    """``async (endpoint) -> stream`` with what a dial needs and nothing more: the
    proxy setting, the TLS context, the socket's keepalive options. (The relay bounds
    each dial with ``connect_timeout``, whichever dialer it has.)"""

    proxy: str | bool = field(default=True, repr=False)
    """``RelayConfig.proxy``. ``True`` (the environment's) is read at the dialer's first
    dial of an endpoint and kept for the dialer's life, as httpx reads it when a client
    is made: reading it again on every dial cost six lookups of ``os.environ`` (52,000
    CPU instructions, 2.5 % of a redial under callgrind)."""
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    """``None``: the system trust store."""
    keepalive: KeepaliveConfig = DEFAULT_KEEPALIVE
    _options: tuple[SocketOption, ...] = field(init=False, repr=False, compare=False)
    """The keepalive's socket options, made once (24,000 instructions a dial made anew),
    without ``TCP_NODELAY``: the TCP stream has it from its start (stream.py)."""
    _proxies: dict[Endpoint, Proxy | None] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        options = tuple(o for o in self.keepalive.socket_options() if o[1] != TCP_NODELAY)
        object.__setattr__(self, "_options", options)

    @classmethod
    def from_config(cls, config: RelayConfig) -> TcpDialer:
        return cls(proxy=config.proxy, ssl_context=config.ssl_context, keepalive=config.keepalive)

    async def __call__(self, endpoint: Endpoint) -> ByteStream:
        """Open the byte stream the WebSocket upgrade runs over (the caller bounds it)."""
        try:
            proxy = self._proxies[endpoint]
        except KeyError:
            proxy = proxy_for(endpoint, self.proxy)
            if self.proxy is True:
                self._proxies[endpoint] = proxy
        host, port = (endpoint.host, endpoint.port) if proxy is None else (proxy.host, proxy.port)
        # Our own stream (stream.py): no scheduler turn for a read that finds bytes
        # or a write the kernel takes.
        tcp: SocketStream = await open_tcp(host, port)
        try:
            sock = tcp.socket
            for level, option, value in self._options:
                sock.setsockopt(level, option, value)
            stream: ByteStream = tcp
            if proxy is not None:
                await open_tunnel(tcp, endpoint, proxy)
            if endpoint.secure:
                context = self.ssl_context or _default_context()
                stream = await TLSStream.handshake(tcp, context, endpoint.host)
        except BaseException:
            tcp.close()
            raise
        return stream


def dialer_for(config: RelayConfig) -> Dialer:
    """The relay's dialer: ``config.dialer``, or the real one built from ``config``."""
    return config.dialer or TcpDialer.from_config(config)


_context: ssl.SSLContext | None = None


def _default_context() -> ssl.SSLContext:
    # The system trust store, loaded once per process: loading it costs milliseconds
    # (and memory) that every redial would otherwise pay again.
    global _context
    if _context is None:
        _context = ssl.create_default_context()
    return _context
