"""Dialers for tests and the soak: faults injected through ``RelayConfig(dialer=...)``.

The relay opens every connection through its dialer (``trio_relay._core.endpoint``
describes the seam: ``async (endpoint, config) -> stream``). These wrap that seam, so
a test breaks the network the relay sees without patching anything::

    dialer = FaultDialer()                      # the real dialer underneath
    config = RelayConfig(dialer=dialer)
    async with open_connector() as connector, open_relay(connector.url, config=config):
        dialer.refuse(2)      # the next two dials: ECONNREFUSED, no packet sent
        dialer.reset()        # every open stream: a TCP reset, both ways
        dialer.stall()        # a vanished peer: nothing arrives, writes vanish
        dialer.fail_writes()  # writes raise BrokenResourceError; reads go on
        dialer.hold_writes()  # writes block (a full receive window) until released
        dialer.dials          # the trio.current_time() of every dial attempt

:class:`MemoryDialer` connects the relay to an in-process server over
``trio.testing.memory_stream_pair`` — no socket at all — for a server written in the
test (hand-made HTTP answers, hostile frames).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from .._core.config import Dialer, RelayConfig
from .._core.endpoint import ByteStream, Endpoint
from .._trio.link.dial import connect

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
        self._buffer += data
        if self._in_upgrade:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return []
            self._buffer = self._buffer[end + 4 :]
            self._in_upgrade = False
        payloads: list[bytes] = []
        while len(self._buffer) >= 2:
            buf = self._buffer
            length, at = buf[1] & 0x7F, 2
            if length == 126:
                if len(buf) < 4:
                    break
                length, at = int.from_bytes(buf[2:4], "big"), 4
            elif length == 127:
                if len(buf) < 10:
                    break
                length, at = int.from_bytes(buf[2:10], "big"), 10
            masked = buf[1] & 0x80
            key = buf[at : at + 4] if masked else b""
            at += 4 if masked else 0
            if len(buf) < at + length:
                break
            payload = buf[at : at + length]
            if masked and length:
                mask = (key * (length // 4 + 1))[:length]
                payload = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(
                    length, "big"
                )
            payloads.append(payload)
            self._buffer = buf[at + length :]
        return payloads


class FaultStream(trio.abc.Stream):
    """A stream whose faults its :class:`FaultDialer` switches on and off."""

    def __init__(self, inner: ByteStream, dialer: FaultDialer) -> None:
        self.inner = inner
        self._dialer = dialer
        self._reset = False
        self._resumed = trio.Event()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._frames = ClientFrames() if dialer.tap is not None else None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._reset:
            raise trio.BrokenResourceError("connection reset (injected)")
        if self._dialer.writes_fail:
            raise trio.BrokenResourceError("write failed (injected)")
        tap = self._dialer.tap
        payloads = self._frames.feed(bytes(data)) if self._frames is not None else []
        if tap is not None:
            for payload in payloads:
                tap(payload, False)
        while self._dialer.writes_held and not self._reset:
            await self._dialer._released.wait()
        if self._dialer.stalled:
            await trio.lowlevel.checkpoint()
            return  # a vanished peer: the bytes go nowhere
        await self.inner.send_all(data)
        self.bytes_sent += len(data)
        if tap is not None:
            for payload in payloads:
                tap(payload, True)

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
        await trio.aclose_forcefully(self.inner)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        self._dialer.streams.discard(self)
        await trio.aclose_forcefully(self.inner)  # type: ignore[arg-type]


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

    def __init__(self, inner: Dialer | None = None, *, tap: WriteTap | None = None) -> None:
        """``inner``: the dialer underneath (the real one by default). ``tap``: told of
        every WebSocket frame the client writes (see :data:`WriteTap`)."""
        self._inner: Dialer = inner or connect
        self.tap = tap
        self.dials: list[float] = []
        """``trio.current_time()`` of every dial attempt, refused ones included."""
        self.streams: set[FaultStream] = set()
        """The streams handed out and not yet closed."""
        self.stalled = False
        self.writes_fail = False
        self.writes_held = False
        self._released = trio.Event()
        self._refusals = 0
        self._resumed = trio.Event()
        self._dialled = trio.Event()

    async def __call__(self, endpoint: Endpoint, config: RelayConfig) -> ByteStream:
        self.dials.append(trio.current_time())
        self._dialled.set()
        self._dialled = trio.Event()
        if self._refusals:
            self._refusals -= 1
            await trio.lowlevel.checkpoint()
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused (injected)")
        stream = FaultStream(await self._inner(endpoint, config), self)
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
        """Blackhole every stream: nothing arrives, writes vanish (until :meth:`resume`)."""
        self.stalled = True
        self._resumed = trio.Event()

    def resume(self) -> None:
        self.stalled = False
        self._resumed.set()

    def _resumed_event(self) -> trio.Event:
        return self._resumed

    def hold_writes(self) -> None:
        """Block every write until :meth:`release_writes` (a peer that stopped reading:
        its receive window is full); reads go on."""
        self.writes_held = True
        self._released = trio.Event()

    def release_writes(self) -> None:
        self.writes_held = False
        self._released.set()

    def fail_writes(self, fail: bool = True) -> None:
        """Make every write raise ``BrokenResourceError`` (reads keep working)."""
        self.writes_fail = fail


ServerHandler = Callable[[trio.abc.Stream], Awaitable[None]]


class MemoryDialer:
    """Connects each dial to ``handler(server_stream)``, run in ``nursery``, over an
    in-memory stream pair; ``endpoint`` and the config's TLS settings are ignored."""

    def __init__(self, nursery: trio.Nursery, handler: ServerHandler) -> None:
        self._nursery = nursery
        self._handler = handler
        self.dials = 0

    async def __call__(self, endpoint: Endpoint, config: RelayConfig) -> ByteStream:
        self.dials += 1
        client, server = trio.testing.memory_stream_pair()
        self._nursery.start_soon(self._serve, server)
        await trio.lowlevel.checkpoint()
        return client

    async def _serve(self, stream: trio.abc.Stream) -> None:
        async with stream:
            await self._handler(stream)
