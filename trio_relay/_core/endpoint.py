"""Where a relay dials, and the seam through which it does.

`Endpoint` is split out of the normalised URL once per relay. A *dialer* turns
an endpoint into a connected byte stream (TCP, through a proxy if configured, and TLS
for ``wss``); the WebSocket upgrade then runs over whatever stream it returns. The
default dialer is ``trio_relay._trio.link.dial.TcpDialer``, built from the config when
the relay opens; ``RelayConfig(dialer=...)`` replaces it, which is how tests and the
soak inject faults (``trio_relay.testing``: ``FaultDialer``, ``MemoryDialer``) instead
of patching private modules.

Sans-I/O: the stream is described structurally (`ByteStream`, the relay's one
stream interface), so this module needs no Trio.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)  # no __dict__: one per relay
class Endpoint:
    """Host, port, TLS or not, and the resource (path and query) of the relay URL."""

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
        return cls(host, parts.port or (443 if secure else 80), secure, resource or "/")

    @property
    def host_header(self) -> str:
        default_port = 443 if self.secure else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default_port else f"{host}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: the bearer token goes to this origin only."""
        return ("wss" if self.secure else "ws", self.host.lower(), self.port)

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


class ByteStream(Protocol):
    """The one stream interface of the relay: what a dialer returns and every part of the
    shell writes to (the WebSocket, its upgrade, the proxy tunnel).

    Declared here, in the sans-I/O core, because ``RelayConfig.dialer``'s type names it;
    described structurally, so it needs no Trio. The implementations are in
    ``trio_relay/_trio/link/stream.py`` (the TCP socket, TLS) and
    ``trio_relay/testing`` (``FaultDialer``'s and ``MemoryDialer``'s streams). Each member
    is one the relay calls:

    - ``receive_some``: the reader's one read per turn (``b""`` at EOF);
    - ``send_all``: the writer task's write, which may wait for room;
    - ``send_nowait``: a request's *direct write*: hand over what the stream takes now,
      never waiting, and return how many bytes it took (0 is an answer: "nothing now,
      take the slow path"; the relay leaves the rest to ``send_all`` in its writer);
    - ``close``: the end of a connection, at once and without a goodbye (no TLS
      ``close_notify``): the WebSocket's closing handshake has run or been given up by
      then, and the redial follows in the same scheduler turn;
    - ``aclose``: Trio's ``AsyncResource`` convention, for a caller outside the relay
      (``async with``, ``trio.aclose_forcefully``).

    Errors: ``trio.BrokenResourceError`` for the network's faults (the ``OSError``
    as its ``__cause__``), ``trio.ClosedResourceError`` after ``close``.
    """

    async def receive_some(self, max_bytes: int | None = None, /) -> bytes | bytearray: ...

    async def send_all(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def send_nowait(self, data: bytes | bytearray | memoryview, /) -> int: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...
