"""Dialers for tests and the soak: faults injected through ``RelayConfig(dialer=...)``.

The relay opens every connection through its dialer (``trio_relay._core.endpoint``
describes the seam: ``async (endpoint) -> stream``, a stream with the relay's one
stream interface). These wrap that seam, so a test breaks the network the relay sees
without patching anything, and the relay writes to their streams as it writes to a
socket (a request's direct write included)::

    dialer = FaultDialer()                      # the real dialer underneath
    config = RelayConfig(dialer=dialer)
    async with open_connector() as connector, open_relay(connector.url, config=config):
        dialer.refuse(2)      # the next two dials: ECONNREFUSED, no packet sent
        dialer.reset()        # every open stream: a TCP reset, both ways
        dialer.stall()        # a vanished peer: nothing arrives, writes vanish
        dialer.fail_writes()  # writes raise BrokenResourceError; reads go on
        dialer.hold_writes()  # writes block (a full receive window) until released
        dialer.dials          # the trio.current_time() of every dial attempt
        dialer.direct_writes  # writes the relay made without waiting (send_nowait)

[`MemoryDialer`][trio_relay.testing.MemoryDialer] connects the relay to an in-process server over a
[`memory_stream_pair`][trio_relay.testing.memory_stream_pair] — no socket at all — for a server
written in the test
(hand-made HTTP answers, hostile frames).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
from collections.abc import Awaitable, Callable

import trio

from .._core.config import Dialer, RelayConfig
from .._core.endpoint import ByteStream, Endpoint
from .._trio.link.dial import TcpDialer

WriteTap = Callable[[bytes, bool], None]
"""``tap(payload, returned)``: a WebSocket frame's payload the client wrote, unmasked;
called with ``False`` when the write is attempted and ``True`` once it returned."""


class ClientFrames:
    """Reads the client side of a WebSocket byte stream back: skips the upgrade request
    and returns each frame's unmasked payload (RFC 6455 §5.2). For taps in tests and
    the soak, which look for what the client handed to its socket."""

    def __init__(self) -> None:
        self._buffer = b""
        self._in_upgrade = True

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads of the frames ``data`` completes (consumed)."""
        payloads, self._buffer, self._in_upgrade = _parse(self._buffer + data, self._in_upgrade)
        return payloads

    def peek(self, data: bytes) -> list[bytes]:
        """What `feed` would return for ``data``, without consuming it."""
        return _parse(self._buffer + data, self._in_upgrade)[0]


def _parse(buffer: bytes, in_upgrade: bool) -> tuple[list[bytes], bytes, bool]:
    if in_upgrade:
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return [], buffer, True
        buffer = buffer[end + 4 :]
    payloads: list[bytes] = []
    while len(buffer) >= 2:
        length, at = buffer[1] & 0x7F, 2
        if length == 126:
            if len(buffer) < 4:
                break
            length, at = int.from_bytes(buffer[2:4], "big"), 4
        elif length == 127:
            if len(buffer) < 10:
                break
            length, at = int.from_bytes(buffer[2:10], "big"), 10
        masked = buffer[1] & 0x80
        key = buffer[at : at + 4] if masked else b""
        at += 4 if masked else 0
        if len(buffer) < at + length:
            break
        payload = buffer[at : at + length]
        if masked and length:
            mask = (key * (length // 4 + 1))[:length]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(
                length, "big"
            )
        payloads.append(payload)
        buffer = buffer[at + length :]
    return payloads, buffer, False


class FaultStream(trio.abc.Stream):
    """A stream whose faults its [`FaultDialer`][trio_relay.testing.FaultDialer] switches on and
    off.

    It has the relay's stream interface, direct write included:
    [`send_nowait`][trio_relay.testing.FaultStream.send_nowait]
    honours every fault as `send_all` does (a reset or
    failing writes raise, held
    writes take nothing, a stall swallows the bytes), so under a fault the relay takes
    the same write path as on a real socket."""

    def __init__(self, inner: ByteStream, dialer: FaultDialer) -> None:
        self.inner = inner
        self._dialer = dialer
        self._reset = False
        self._resumed = trio.Event()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._frames = ClientFrames() if dialer.tap is not None else None

    def _check_writable(self) -> None:
        if self._reset:
            raise trio.BrokenResourceError("connection reset (injected)")
        if self._dialer.writes_fail:
            raise trio.BrokenResourceError("write failed (injected)")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._check_writable()
        tap = self._dialer.tap
        payloads = self._frames.feed(bytes(data)) if self._frames is not None else []
        if tap is not None:
            for payload in payloads:
                tap(payload, False)
        while self._dialer.writes_held and not self._reset:
            await self._dialer._released.wait()
        if self._dialer.stalled:
            self._dialer.awaited_writes += 1
            await trio.lowlevel.checkpoint()
            return  # a vanished peer: the bytes go nowhere
        await self.inner.send_all(data)
        self.bytes_sent += len(data)
        self._dialer.awaited_writes += 1
        if tap is not None:
            for payload in payloads:
                tap(payload, True)

    def send_nowait(self, data: bytes | bytearray | memoryview) -> int:
        """How much of ``data`` the stream underneath takes now, faults applied: raises
        once reset or while writes fail, takes nothing while writes are held (a full
        receive window), takes everything and drops it while stalled (a vanished peer)."""
        self._check_writable()
        tap = self._dialer.tap
        frames = self._frames
        if tap is not None and frames is not None:
            # The write of every frame in ``data`` begins here, taken or not, as it
            # does in send_all (attempted, then written once its last byte is taken).
            for payload in frames.peek(bytes(data)):
                tap(payload, False)
        if self._dialer.writes_held:
            return 0
        if self._dialer.stalled:
            if frames is not None:
                frames.feed(bytes(data))
            if data:
                self._dialer.direct_writes += 1
            return len(data)  # a vanished peer: taken, and gone
        taken = self.inner.send_nowait(data)
        if taken:
            self.bytes_sent += taken
            self._dialer.direct_writes += 1
            if tap is not None and frames is not None:
                for payload in frames.feed(bytes(data[:taken])):
                    tap(payload, True)
        return taken

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        while self._dialer.stalled and not self._reset:
            await self._dialer._resumed_event().wait()
        if self._reset:
            raise trio.BrokenResourceError("connection reset (injected)")
        try:
            data = await self.inner.receive_some(max_bytes)
        except trio.ClosedResourceError:
            if self._reset:
                raise trio.BrokenResourceError("connection reset (injected)") from None
            raise
        if self._dialer.stalled:
            # Arrived while stalling: hold it as a vanished peer's packets are held —
            # not at all. Drop it and wait for more.
            return await self.receive_some(max_bytes)
        self.bytes_received += len(data)
        return data

    async def reset(self) -> None:
        """A TCP reset: the peer sees RST (SO_LINGER 0), our side errors out."""
        self._reset = True
        _linger_zero(self.inner)
        self.inner.close()
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        self._dialer.streams.discard(self)
        self.inner.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


def _linger_zero(stream: object) -> None:
    # Through TLS to the TCP socket, if there is one (memory streams have none): a
    # trio.SocketStream or the relay's own stream, both with a ``socket`` attribute.
    while not hasattr(stream, "socket"):
        inner = getattr(stream, "transport_stream", None)
        if inner is None:
            return
        stream = inner
    with contextlib.suppress(OSError):  # already closed
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class FaultDialer:
    """Wraps a dialer (the real one by default) and injects faults on command."""

    def __init__(
        self,
        inner: Dialer | None = None,
        *,
        tap: WriteTap | None = None,
        config: RelayConfig | None = None,
    ) -> None:
        """``inner``: the dialer underneath; ``None`` is the real one, built from
        ``config`` (its proxy, ``ssl_context`` and keepalive; the defaults when
        ``config`` is ``None``). ``tap``: told of every WebSocket frame the client
        writes (see `WriteTap`)."""
        self._inner: Dialer = inner or TcpDialer.from_config(config or RelayConfig())
        self.tap = tap
        self.dials: list[float] = []
        """``trio.current_time()`` of every dial attempt, refused ones included."""
        self.streams: set[FaultStream] = set()
        """The streams handed out and not yet closed."""
        self.direct_writes = 0
        """Writes made with ``send_nowait`` that the streams took bytes of (a stalled
        stream takes them and drops them): the relay's direct write, a request writing
        its own frame without waiting, as on a real socket. One that took nothing
        (held writes, a full socket) is not counted: its bytes go by ``send_all``."""
        self.awaited_writes = 0
        """Writes made with ``send_all`` that returned (the upgrade request, the writer
        task's batches, the rest of a direct write the stream did not take at once)."""
        self.stalled = False
        self.writes_fail = False
        self.writes_held = False
        self._released = trio.Event()
        self._refusals = 0
        self._resumed = trio.Event()
        self._dialled = trio.Event()

    async def __call__(self, endpoint: Endpoint) -> ByteStream:
        self.dials.append(trio.current_time())
        self._dialled.set()
        self._dialled = trio.Event()
        if self._refusals:
            self._refusals -= 1
            await trio.lowlevel.checkpoint()
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused (injected)")
        stream = FaultStream(await self._inner(endpoint), self)
        self.streams.add(stream)
        return stream

    async def wait_dials(self, count: int) -> None:
        """Wait until ``count`` dials were attempted in all (bound it with a timeout)."""
        while len(self.dials) < count:
            await self._dialled.wait()

    def refuse(self, count: int = 1) -> None:
        """Refuse the next ``count`` dials with ECONNREFUSED, before any packet."""
        self._refusals = count

    async def reset(self) -> None:
        """Reset every open stream (RST to the peer, errors on our side)."""
        for stream in list(self.streams):
            self.streams.discard(stream)
            await stream.reset()

    def stall(self) -> None:
        """Blackhole every stream: nothing arrives, writes vanish (until
        `resume`)."""
        self.stalled = True
        self._resumed = trio.Event()

    def resume(self) -> None:
        self.stalled = False
        self._resumed.set()

    def _resumed_event(self) -> trio.Event:
        return self._resumed

    def hold_writes(self) -> None:
        """Block every write until
        `release_writes` (a peer that stopped
        reading:
        its receive window is full); reads go on."""
        self.writes_held = True
        self._released = trio.Event()

    def release_writes(self) -> None:
        self.writes_held = False
        self._released.set()

    def fail_writes(self, fail: bool = True) -> None:
        """Make every write raise ``BrokenResourceError`` (reads keep working);
        ``fail=False`` lets writes through again."""
        self.writes_fail = fail


ServerHandler = Callable[[trio.abc.Stream], Awaitable[None]]

MEMORY_WINDOW = 64 * 1024
"""What a [`MemoryStream`][trio_relay.testing.MemoryStream] holds unread in each direction before a
write waits:
the order of a loopback socket's send buffer."""


class _Direction:
    """The bytes in flight one way: written, not yet read."""

    __slots__ = ("buffer", "changed", "reader_gone", "writer_done")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.writer_done = False
        """The writing end closed: the reader gets EOF once the buffer is empty."""
        self.reader_gone = False
        """The reading end closed: writes fail, as on a socket whose peer is gone."""
        self.changed = trio.lowlevel.ParkingLot()
        """Woken whenever any of the above changes."""

    def wake(self) -> None:
        self.changed.unpark_all()


class MemoryStream(trio.abc.Stream):
    """One end of an in-memory byte stream with the relay's stream interface: like a
    loopback socket, each direction holds at most ``window`` unread bytes, so
    [`send_nowait`][trio_relay.testing.MemoryStream.send_nowait] takes what fits (maybe 0) and
    `send_all` waits for room.
    Made in pairs by [`memory_stream_pair`][trio_relay.testing.memory_stream_pair]."""

    def __init__(self, incoming: _Direction, outgoing: _Direction, window: int) -> None:
        self._in = incoming
        self._out = outgoing
        self._window = window
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        incoming = self._in
        waited = False
        while not self._closed and not incoming.buffer and not incoming.writer_done:
            waited = True
            await incoming.changed.park()
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        if not waited:
            await trio.lowlevel.checkpoint()
        size = len(incoming.buffer) if max_bytes is None else max_bytes
        data = bytes(incoming.buffer[:size])
        del incoming.buffer[:size]
        incoming.wake()  # room for a writer
        return data

    def send_nowait(self, data: bytes | bytearray | memoryview) -> int:
        """Take what of ``data`` fits in the window now; the bytes taken (0 when it is
        full)."""
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        outgoing = self._out
        if outgoing.reader_gone:
            raise trio.BrokenResourceError("the other end of the memory stream was closed")
        taken = min(len(data), self._window - len(outgoing.buffer))
        if taken > 0:
            outgoing.buffer += data[:taken]
            outgoing.wake()
            return taken
        return 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        sent = self.send_nowait(view)
        if sent == len(view):
            await trio.lowlevel.checkpoint()
            return
        while sent < len(view):
            await self._out.changed.park()
            sent += self.send_nowait(view[sent:])

    async def wait_send_all_might_not_block(self) -> None:
        while not self._closed and len(self._out.buffer) >= self._window:
            await self._out.changed.park()
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._out.writer_done = True
            self._in.reader_gone = True
            self._in.buffer.clear()
            self._out.wake()
            self._in.wake()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


def memory_stream_pair(window: int = MEMORY_WINDOW) -> tuple[MemoryStream, MemoryStream]:
    """Two connected [`MemoryStream`][trio_relay.testing.MemoryStream] ends (what one writes, the
    other reads). ``window``: the bytes each direction holds unread before a write
    waits."""
    one, two = _Direction(), _Direction()
    return MemoryStream(one, two, window), MemoryStream(two, one, window)


class MemoryDialer:
    """Connects each dial to ``handler(server_stream)``, run in ``nursery``, over an
    in-memory stream pair ([`memory_stream_pair`][trio_relay.testing.memory_stream_pair]);
    ``endpoint`` is ignored, and
    there is no TLS. ``window``: the bytes each direction holds unread before a
    write waits."""

    def __init__(
        self, nursery: trio.Nursery, handler: ServerHandler, *, window: int = MEMORY_WINDOW
    ) -> None:
        self._nursery = nursery
        self._handler = handler
        self._window = window
        self.dials = 0

    async def __call__(self, endpoint: Endpoint) -> ByteStream:
        self.dials += 1
        client, server = memory_stream_pair(self._window)
        self._nursery.start_soon(self._serve, server)
        await trio.lowlevel.checkpoint()
        return client

    async def _serve(self, stream: trio.abc.Stream) -> None:
        async with stream:
            await self._handler(stream)
