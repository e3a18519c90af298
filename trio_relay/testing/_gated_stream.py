"""The stream a reference-connector session reads and writes through: a gate that a
test can close to make the connector fall silent (nothing read, nothing written, pings
unanswered), with room to push bytes back (the HTTP routes peek at a request before the
WebSocket upgrade sees it) and a switch that swallows our pongs."""

from __future__ import annotations

from collections.abc import Callable

import trio


def _is_one_pong(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is exactly one unmasked Pong frame (FIN, opcode 0xA): how
    trio-websocket's server side writes each pong, one ``send_all`` per frame."""
    head = bytes(data[:2])
    return len(head) == 2 and head[0] == 0x8A and len(data) == 2 + (head[1] & 0x7F)


def _is_close_frame(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts with an unmasked Close frame (FIN, opcode 0x8): each
    ``send_all`` of trio-websocket's server side is one whole frame."""
    return len(data) >= 2 and data[0] == 0x88


class GatedStream(trio.abc.Stream):
    """A pass-through stream that can be made to stop moving bytes in both directions.

    trio-websocket answers pings from its own reader task, so silencing a session at the
    WebSocket layer is impossible; gating the byte stream underneath it is what makes a
    "silent peer" really silent: no pong, no frame, no close, while the TCP connection
    stays up and the kernel keeps acknowledging. Bytes that arrive while closed are held,
    not handed up, and are processed in order once the gate reopens.
    """

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.is_open = True
        self._unread = b""
        self._lot = trio.lowlevel.ParkingLot()
        self.finished = trio.Event()
        """Set once the underlying stream ended (EOF, error, or closed by anyone)."""
        self.drop_pongs = False
        """Swallow the pongs trio-websocket writes: a peer that ignores pings."""
        self._write_lock = trio.StrictFIFOLock()
        # trio-websocket serialises its own writes; a frame the session writes itself
        # (inject_raw of a text message that is not UTF-8) must not land inside one.
        self.on_close_sent: Callable[[], None] | None = None
        """Called (synchronously, before the writer's next checkpoint) each time a Close
        frame has been handed to the stream underneath."""

    def close_gate(self) -> None:
        self.is_open = False

    def open_gate(self) -> None:
        self.is_open = True
        self._lot.unpark_all()

    async def _pass(self) -> None:
        while not self.is_open:
            await self._lot.park()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._pass()
        if self.drop_pongs and _is_one_pong(data):
            return
        try:
            async with self._write_lock:
                await self.inner.send_all(data)
                if self.on_close_sent is not None and _is_close_frame(data):
                    self.on_close_sent()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.finished.set()
            raise

    async def wait_send_all_might_not_block(self) -> None:
        await self._pass()
        await self.inner.wait_send_all_might_not_block()

    def unread(self, data: bytes) -> None:
        """Put ``data`` back: the next receive returns it first (the HTTP routes read a
        request head before deciding it is the WebSocket server's)."""
        self._unread = data + self._unread

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        await self._pass()
        if self._unread:
            size = len(self._unread) if max_bytes is None else max_bytes
            held, self._unread = self._unread[:size], self._unread[size:]
            return held
        try:
            data = await self.inner.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.finished.set()
            raise
        if not data:
            self.finished.set()
        # The gate may have closed while we were blocked in the kernel: hold the bytes.
        await self._pass()
        return data

    async def aclose(self) -> None:
        self.finished.set()
        await self.inner.aclose()
