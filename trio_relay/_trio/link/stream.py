"""The relay's byte streams: TCP (a non-blocking stdlib socket driven by Trio's I/O
waits) and TLS over it, both with the one stream interface of the relay
(``_core/endpoint.ByteStream``: ``receive_some``, ``send_all``, ``send_nowait``,
``close``, ``aclose``). The test streams of ``trio_relay.testing`` have it too, so a
request's direct write (``send_nowait``) is the same code under a fault as in
production; nothing in the shell asks which kind of stream it has.

Why not ``trio.SocketStream``: every call of it is a guaranteed checkpoint, so a read
that finds bytes waiting and a write the kernel takes at once each still cost a turn of
the run loop (and, for the read, a ``recv`` that fails with ``EAGAIN`` before the wait).
On the relay's hot path — one write, then one read per round trip — that is half of the
scheduler's work per request. Here a call yields only when it has to wait:

- `receive_some` waits for readability *before* reading when the last read came
  back short (the socket was drained: reading now would fail with ``EAGAIN``), reads at
  once otherwise, and checkpoints at least every `READS_PER_CHECKPOINT` reads so
  a flood of bytes cannot keep the reader from being cancelled or others from running;
- `send_all` writes at once and waits only for a full send buffer.

Whoever reads or writes in a loop without another await must therefore checkpoint
itself; the relay's reader does (see above), its writer ends when its box is empty.

Errors are Trio's stream errors, as ``trio.SocketStream`` raises them: an ``OSError``
becomes ``trio.BrokenResourceError`` (the ``OSError`` as its cause), use after
`close` is ``trio.ClosedResourceError``. This module is the only one of the shell
that maps an ``OSError`` of the network to those errors, and the only one that makes the
relay's socket I/O calls of ``trio.lowlevel`` (waits for readability and writability,
``notify_closing``).
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket
import ssl
from typing import cast

import trio

from ..._core.endpoint import ByteStream

__all__ = [
    "READS_PER_CHECKPOINT",
    "RECEIVE_DEFAULT",
    "STREAM_ERRORS",
    "ByteStream",
    "SocketStream",
    "TLSStream",
    "checked",
    "from_trio",
    "open_tcp",
]

STREAM_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)
"""How a dial or a byte stream fails (refused, resets, EPIPE, TLS errors, a stream closed
under us). The relay's own streams raise only the two Trio errors; ``OSError`` is what
a dialer raises for a connect that failed."""

RECEIVE_DEFAULT = 1 << 16
READS_PER_CHECKPOINT = 16
"""At most this many reads in a row without yielding to the scheduler."""

_wait_readable = trio.lowlevel.wait_readable
_wait_writable = trio.lowlevel.wait_writable
_checkpoint = trio.lowlevel.checkpoint


class SocketStream(trio.abc.HalfCloseableStream):
    """A connected TCP socket as a Trio stream; see the module docstring."""

    __slots__ = ("_closed", "_drained", "_reads_left", "socket")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.socket = sock
        """The stdlib socket (for socket options; never read or write it directly)."""
        self._closed = False
        self._drained = False
        """The last read came back short: the next one waits for readability first."""
        self._reads_left = READS_PER_CHECKPOINT

    def __repr__(self) -> str:
        return f"<trio_relay SocketStream fd={self.socket.fileno()}>"

    @property
    def closed(self) -> bool:
        """`close` (or `aclose`) was called."""
        return self._closed

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = RECEIVE_DEFAULT if max_bytes is None else max_bytes
        if size < 1:
            raise ValueError("max_bytes must be >= 1")
        sock = self.socket
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        if self._drained:
            self._reads_left = READS_PER_CHECKPOINT
            await _wait_readable(sock)
        else:
            self._reads_left -= 1
            if self._reads_left <= 0:
                self._reads_left = READS_PER_CHECKPOINT
                await _checkpoint()
        while True:
            try:
                data = sock.recv(size)
            except BlockingIOError:
                await _wait_readable(sock)
                continue
            except OSError as exc:
                raise self._translate(exc) from exc
            self._drained = len(data) < size
            return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        total = len(data)
        sent = self.send_nowait(data)
        if sent == total:
            return
        view = memoryview(data)
        while sent < total:
            await _wait_writable(self.socket)
            sent += self.send_nowait(view[sent:])

    def send_nowait(self, data: bytes | bytearray | memoryview) -> int:
        """Write what the kernel takes now, without waiting; the bytes taken (0 when the
        send buffer is full). A request's direct write (see ``WebSocket.write_now``)."""
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        try:
            return self.socket.send(data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise self._translate(exc) from exc

    async def wait_send_all_might_not_block(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        try:
            await _wait_writable(self.socket)
        except OSError as exc:
            raise self._translate(exc) from exc

    async def send_eof(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        await _checkpoint()
        try:
            self.socket.shutdown(socket.SHUT_WR)
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:  # the peer is gone already: nothing to end
                raise self._translate(exc) from exc

    def close(self) -> None:
        """Close now (what `aclose` does, without its checkpoint): how the relay
        ends a connection, the redial following in the same turn."""
        if not self._closed:
            self._closed = True
            # Wake any task waiting on the socket (it gets ClosedResourceError) before
            # the fd number can be reused.
            trio.lowlevel.notify_closing(self.socket)
            self.socket.close()

    async def aclose(self) -> None:
        self.close()
        await _checkpoint()

    def _translate(self, exc: OSError) -> Exception:
        if self._closed:
            return trio.ClosedResourceError("the stream was closed")
        return trio.BrokenResourceError(f"socket error: {exc}")


class TLSStream:
    """TLS (``trio.SSLStream``) over the relay's `SocketStream`, with the relay's
    stream interface.

    `send_nowait` takes nothing and returns 0, always: "no direct write here, take
    the slow path" (the relay then leaves the frame to its writer, which writes it with
    `send_all` in the same scheduler pass). A TLS write cannot honour "only what
    can go now": the plaintext is encrypted into records *before* the socket is asked,
    so a socket that takes part of them would leave ciphertext that only this stream
    could still write, and nobody would wake it to. Reaching into ``trio.SSLStream``'s
    SSL object and buffers to do better would tie the relay to its private state.
    Measured against the relay that never tried a direct write on TLS (loopback, the
    reference connector in a process of its own, five interleaved rounds on a loaded
    2-core machine): client CPU per request 399 → 403 µs sequential and 58 → 61 µs at
    16 requesters (medians), inside the noise.
    """

    __slots__ = ("tls", "transport_stream")

    def __init__(self, tls: trio.SSLStream[SocketStream]) -> None:
        self.tls = tls
        self.transport_stream = tls.transport_stream
        """The TCP stream under the TLS (for socket options; never read or write it)."""

    @classmethod
    async def handshake(
        cls, tcp: SocketStream, context: ssl.SSLContext, server_hostname: str
    ) -> TLSStream:
        """TLS over ``tcp``, the handshake done (the caller bounds it and closes ``tcp``
        if it fails)."""
        tls = trio.SSLStream(tcp, context, server_hostname=server_hostname)
        await tls.do_handshake()
        return cls(tls)

    def __repr__(self) -> str:
        return f"<trio_relay TLSStream over {self.transport_stream!r}>"

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.tls.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.tls.send_all(data)

    def send_nowait(self, data: bytes | bytearray | memoryview) -> int:
        """Take nothing (see the class docstring); raises if the stream was closed."""
        if self.transport_stream.closed:
            raise trio.ClosedResourceError("the stream was closed")
        return 0

    def close(self) -> None:
        """Close the TCP stream at once, without TLS's ``close_notify`` (the relay's
        WebSocket has had its closing handshake by then)."""
        self.transport_stream.close()

    async def aclose(self) -> None:
        await self.tls.aclose()


_INTERFACE = ("receive_some", "send_all", "send_nowait", "close", "aclose")


def checked(stream: object) -> ByteStream:
    """``stream`` if it has the relay's stream interface; else a ``TypeError`` that says
    what is missing (a dialer written for another interface, e.g. one returning a plain
    ``trio.SocketStream``). Asked once per dial, by the relay."""
    missing = [name for name in _INTERFACE if not callable(getattr(stream, name, None))]
    if missing:
        raise TypeError(
            f"RelayConfig(dialer=...) returned {type(stream).__name__}, which lacks "
            f"{', '.join(missing)}: a dialer must return a stream with receive_some, "
            "send_all, send_nowait (write what can go now, return the count; 0 is fine), "
            "close and aclose (trio_relay.testing's MemoryDialer and FaultDialer "
            "return such streams)"
        )
    return cast(ByteStream, stream)


async def open_tcp(host: str, port: int) -> SocketStream:
    """A TCP connection with ``TCP_NODELAY``. A host name goes through Trio's happy
    eyeballs (every address, staggered); an IP literal — a connector on loopback or
    in the same network, the common case for a gateway — is one ``connect``, without
    the resolver, the nursery and the task per attempt that happy eyeballs costs,
    which is a tenth of a healthy link's redial."""
    literal = _ip_literal(host)
    if literal is None:
        return from_trio(await trio.open_tcp_stream(host, port))
    family, address = literal
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        error = sock.connect_ex((address, port))
        if error in (errno.EINPROGRESS, errno.EWOULDBLOCK):
            await _wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        else:
            await _checkpoint()  # a connect is a checkpoint, even one done at once
        if error:
            raise OSError(error, f"connect to {host}:{port} failed: {os.strerror(error)}")
    except BaseException:
        trio.lowlevel.notify_closing(sock)
        sock.close()
        raise
    return SocketStream(sock)


@functools.lru_cache(maxsize=64)
def _ip_literal(host: str) -> tuple[socket.AddressFamily, str] | None:
    """The family and the address of an IP literal, None for a host name. Kept: a relay
    dials the same host every time, and the parse costs 21,000 instructions a dial."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    return (socket.AF_INET6 if address.version == 6 else socket.AF_INET), str(address)


def from_trio(tcp: trio.SocketStream) -> SocketStream:
    """Take the socket of a connected ``trio.SocketStream`` (which keeps ``TCP_NODELAY``
    and its other options); the Trio stream is unusable afterwards."""
    trio_socket = tcp.socket
    family, kind, proto = trio_socket.family, trio_socket.type, trio_socket.proto
    fd = trio_socket.detach()
    return SocketStream(socket.socket(family, kind, proto, fileno=fd))
