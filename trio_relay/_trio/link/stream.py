"""The relay's TCP byte stream: a non-blocking stdlib socket driven by Trio's I/O waits.

Why not ``trio.SocketStream``: every call of it is a guaranteed checkpoint, so a read
that finds bytes waiting and a write the kernel takes at once each still cost a turn of
the run loop (and, for the read, a ``recv`` that fails with ``EAGAIN`` before the wait).
On the relay's hot path — one write, then one read per round trip — that is half of the
scheduler's work per request. Here a call yields only when it has to wait:

- :meth:`receive_some` waits for readability *before* reading when the last read came
  back short (the socket was drained: reading now would fail with ``EAGAIN``), reads at
  once otherwise, and checkpoints at least every :data:`READS_PER_CHECKPOINT` reads so
  a flood of bytes cannot keep the reader from being cancelled or others from running;
- :meth:`send_all` writes at once and waits only for a full send buffer.

Whoever reads or writes in a loop without another await must therefore checkpoint
itself; the relay's reader does (see above), its writer ends when its box is empty.

Errors are Trio's stream errors, as ``trio.SocketStream`` raises them: an ``OSError``
becomes ``trio.BrokenResourceError`` (the ``OSError`` as its cause), use after
:meth:`aclose` is ``trio.ClosedResourceError``. Every Trio call of the relay's socket
I/O is in this module.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

import trio

__all__ = ["RECEIVE_DEFAULT", "READS_PER_CHECKPOINT", "SocketStream", "from_trio", "open_tcp"]

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
        """Write what the kernel takes now, without waiting; the bytes taken (maybe 0).
        For a caller that must not block on the socket (see ``WebSocket.write_now``)."""
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
        """Close now (what :meth:`aclose` does, without its checkpoint)."""
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


async def open_tcp(host: str, port: int) -> SocketStream:
    """A TCP connection with ``TCP_NODELAY``. A host name goes through Trio's happy
    eyeballs (every address, staggered); an IP literal — a connector on loopback or
    in the same network, the common case for a gateway — is one ``connect``, without
    the resolver, the nursery and the task per attempt that happy eyeballs costs,
    which is a tenth of a healthy link's redial."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return from_trio(await trio.open_tcp_stream(host, port))
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        error = sock.connect_ex((str(address), port))
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


def from_trio(tcp: trio.SocketStream) -> SocketStream:
    """Take the socket of a connected ``trio.SocketStream`` (which keeps ``TCP_NODELAY``
    and its other options); the Trio stream is unusable afterwards."""
    trio_socket = tcp.socket
    family, kind, proto = trio_socket.family, trio_socket.type, trio_socket.proto
    fd = trio_socket.detach()
    return SocketStream(socket.socket(family, kind, proto, fileno=fd))
