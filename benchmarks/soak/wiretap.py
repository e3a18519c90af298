"""Reading back what the client hands to its socket, through the public dialer seam.

The relay opens every connection through ``RelayConfig(dialer=...)``. The soak gives it
:class:`TapDialer`: the public pass-through ``trio_relay.testing.FaultDialer`` (the real
dialer underneath, no fault switched on) whose streams are wrapped in
:class:`TappedStream`. Before each ``send_all`` the bytes are decoded as the client's
side of a WebSocket (the HTTP upgrade first, then masked frames) and the unmasked text
of every data frame is passed to ``on_send(text, False)``; once ``send_all`` returned,
``on_send(text, True)``. Nothing is changed on the way: the same bytes reach the socket.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import trio
from websockets.utils import apply_mask

__all__ = ["ClientFrames", "TapDialer", "TappedStream"]

OnSend = Callable[[bytes, bool], None]

_CARRY = 32
"""Bytes of decoded text carried over to the next write's, for a nonce cut in two."""
_CONTROL = 0x8
"""Opcodes from 0x8 up are control frames (close, ping, pong): no application data."""


class ClientFrames:
    """An incremental decoder of a client's byte stream: the HTTP upgrade request, then
    masked WebSocket frames. :meth:`feed` returns the unmasked payload bytes of the data
    frames in what it was given, partial frames included (in order)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._upgraded = False
        self._remaining = 0
        """Payload bytes of the current frame still to come."""
        self._mask = b""
        self._offset = 0
        """Payload bytes of the current frame already seen (for the mask's phase)."""
        self._data = False
        """Whether the current frame carries application data."""

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        self._buffer += data
        out = bytearray()
        if not self._upgraded:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return b""
            del self._buffer[: end + 4]
            self._upgraded = True
        while self._buffer:
            if self._remaining == 0 and not self._header():
                break
            take = min(self._remaining, len(self._buffer))
            if take == 0:
                continue  # an empty frame
            chunk = bytes(self._buffer[:take])
            del self._buffer[:take]
            if self._data:
                phase = self._offset % 4
                out += apply_mask(chunk, self._mask[phase:] + self._mask[:phase])
            self._offset += take
            self._remaining -= take
        return bytes(out)

    def _header(self) -> bool:
        """Consume one frame header if it is all there; False when more bytes are needed."""
        buf = self._buffer
        if len(buf) < 2:
            return False
        opcode, length, at = buf[0] & 0x0F, buf[1] & 0x7F, 2
        if length == 126:
            if len(buf) < 4:
                return False
            (length,), at = struct.unpack("!H", buf[2:4]), 4
        elif length == 127:
            if len(buf) < 10:
                return False
            (length,), at = struct.unpack("!Q", buf[2:10]), 10
        masked = bool(buf[1] & 0x80)
        if len(buf) < at + (4 if masked else 0):
            return False
        self._mask = bytes(buf[at : at + 4]) if masked else b"\0\0\0\0"
        del buf[: at + (4 if masked else 0)]
        self._remaining, self._offset = length, 0
        self._data = opcode < _CONTROL
        return True


class TappedStream(trio.abc.Stream):
    """A stream that shows ``on_send`` the text it is about to write, and then that it
    was written."""

    def __init__(self, inner: Any, on_send: OnSend) -> None:
        self.transport_stream = inner
        """The wrapped stream (the name TLS streams use, so walks down to the socket
        pass through)."""
        self._on_send = on_send
        self._frames = ClientFrames()
        self._tail = b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        text = self._frames.feed(data)
        if text:
            # With the end of the text before it: a nonce cut between two writes is
            # still read whole (the readers are idempotent).
            text, self._tail = self._tail + text, text[-_CARRY:]
            self._on_send(text, False)
        await self.transport_stream.send_all(data)
        if text:
            self._on_send(text, True)

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data: bytes | bytearray = await self.transport_stream.receive_some(max_bytes)
        return data

    async def aclose(self) -> None:
        await self.transport_stream.aclose()


class TapDialer:
    """A dialer for ``RelayConfig(dialer=...)``: the real connection, tapped."""

    def __init__(self, on_send: OnSend) -> None:
        from trio_relay.testing import FaultDialer  # type: ignore[attr-defined,unused-ignore]

        self._inner = FaultDialer()
        self._on_send = on_send

    async def __call__(self, endpoint: Any, config: Any) -> TappedStream:
        return TappedStream(await self._inner(endpoint, config), self._on_send)
