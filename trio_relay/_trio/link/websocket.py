"""The relay's WebSocket client: the sans-I/O protocol of ``websockets`` over a
byte stream, driven by the connection's own tasks.

This and ``upgrade.py`` are the only modules that import the WebSocket
library. The rest of the shell sees `upgrade` (stream in,
`WebSocket` out, or `UpgradeFailed` saying how the server refused) and the
`WebSocket` it returns:

- `WebSocket.receive` reads once from the socket and returns the data payloads
  that read completed, in order. It runs in the caller's task (the connection's reader):
  no extra task or channel sits between the socket and the frame decoder. Plain data
  frames are cut here (``_core/ws_frames.py``), every other frame goes whole to the
  protocol. Pongs are matched here; a ping from the peer or its close frame leaves an
  answer *pending*.
- `WebSocket.send_text`, `send_ping` and `send_close` only frame
  bytes into the pending buffer; `flush` writes them. Whoever flushes writes
  everything pending, in the order it was framed, and one flush runs at a time, so the
  reader's pong, the writer's batch and a request's direct write never interleave.
- The end is typed: once the peer closes, the stream fails or the protocol breaks,
  `WebSocket.end` holds a `SocketEnd` and `receive` raises
  `WebSocketEnded` — after it has returned every payload read before the end.

Nothing here decides policy (timeouts, what a refusal means for the redial); the
connection and ``_core/dial_failure.py`` do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import trio
from websockets.exceptions import InvalidState
from websockets.frames import Opcode
from websockets.protocol import Protocol, State

try:  # the C masking the protocol itself uses
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - a websockets built without its C speedups
    from websockets.utils import apply_mask

from ..._core.dial_failure import describe_error
from ..._core.endpoint import ByteStream
from ..._core.random_pool import RandomPool
from ..._core.ws_frames import (
    INVALID_DATA,
    InboundFrames,
    InvalidText,
    TextValidator,
    text_frame,
)
from .ends import (
    ABNORMAL,
    STREAM_ERRORS,
    SocketEnd,
    UpgradeFailed,
    WebSocketEnded,
    WriteFailed,
    upgrade_headers,
)

__all__ = [
    "STREAM_ERRORS",
    "SocketEnd",
    "UpgradeFailed",
    "WebSocket",
    "WebSocketEnded",
    "WriteFailed",
    "upgrade_headers",
]

RECEIVE_SIZE = 1 << 16
"""Bytes asked of the stream per read: big enough that a burst of results is one read."""

MAX_PINGS_AWAITED = 8
"""Pings whose pong we still watch for; a peer that never pongs costs no more."""

_OPEN = State.OPEN

_MASK_KEYS = RandomPool(4, 1024)
"""Masking keys (RFC 6455 §5.3: unpredictable), shared by every connection."""
os.register_at_fork(after_in_child=_MASK_KEYS.forget)

_TEXT, _BINARY, _CONT, _PING, _PONG, _CLOSE = (
    Opcode.TEXT,
    Opcode.BINARY,
    Opcode.CONT,
    Opcode.PING,
    Opcode.PONG,
    Opcode.CLOSE,
)


class WebSocket:
    """One client WebSocket, open. See the module docstring for who calls what."""

    __slots__ = (
        "_backlog",
        "_frames",
        "_pending",
        "_plain_out",
        "_pongs",
        "_protocol",
        "_send_nowait",
        "_text",
        "_write_done",
        "_writing",
        "broken",
        "end",
        "last_received",
        "on_pending",
        "stream",
        "write_started_at",
    )

    def __init__(
        self,
        stream: ByteStream,
        protocol: Protocol,
        max_size: int,
        backlog: bytes | bytearray,
    ) -> None:
        self.stream = stream
        self._protocol = protocol
        extended = bool(protocol.extensions)
        self._frames = InboundFrames(max_size, backlog, passthrough=extended)
        self._backlog = bool(backlog)
        """Bytes of frames came in the same read as the ``101``: the first
        `receive` takes them without reading."""
        self._plain_out = not extended
        self._pending: list[bytes] = []
        self._writing = False
        self._write_done: trio.Event | None = None
        self.write_started_at = 0.0
        """When the `flush` under way began (meaningful while `writing`)."""
        self._pongs: dict[bytes, Callable[[], None]] = {}
        self._text = TextValidator()
        """UTF-8 of text messages the protocol assembled (fragmented, or every message
        under an extension); plain frames are checked by ``_frames``."""
        self.end: SocketEnd | None = None
        self.broken = False
        """A write was cut off midway: nothing more may be written."""
        self.last_received = trio.current_time()
        """When any byte last arrived: the connection's proof of life."""
        self.on_pending: Callable[[], None] | None = None
        """Called when receiving framed an answer (pong, close echo) that needs a flush."""
        self._send_nowait = stream.send_nowait
        """Bound once: a request's direct write calls it (every stream has it)."""

    # --- state -------------------------------------------------------------------------

    @property
    def close_received(self) -> tuple[int, str] | None:
        """The peer's close frame (code, reason), once one has come."""
        close = self._protocol.close_rcvd
        return None if close is None else (close.code, close.reason)

    @property
    def close_sent(self) -> tuple[int, str] | None:
        """Our close frame (code, reason), once one has been framed."""
        close = self._protocol.close_sent
        return None if close is None else (close.code, close.reason)

    @property
    def protocol_failure(self) -> str | None:
        """The kind of RFC 6455 violation that failed the connection (the parser's
        exception class, e.g. ``"ProtocolError"``), or None."""
        exc = self._protocol.parser_exc
        return None if exc is None else type(exc).__name__

    @property
    def can_send(self) -> bool:
        """Open for data frames (not closing, not ended, not broken)."""
        return self.end is None and not self.broken and self._protocol.state is _OPEN

    @property
    def can_send_now(self) -> bool:
        """A data frame framed now may go straight out with `write_now`: nothing
        is pending, nobody is writing, and the socket is open for data frames
        (`can_send`). Whatever the stream (TCP, TLS, a test's): how much it takes
        at once is its own answer to ``send_nowait``. One look, asked by every request."""
        return (
            not self._writing
            and not self._pending
            and self.end is None
            and not self.broken
            and self._protocol.state is _OPEN
        )

    @property
    def writing(self) -> bool:
        """A `flush` is under way (in some task)."""
        return self._writing

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    # --- receiving ---------------------------------------------------------------------

    async def receive(self) -> list[bytes]:
        """Read once; the payloads of the data frames completed, in order.

        Fragments come as they arrive (newline-delimited JSON needs no message
        boundaries). Raises `WebSocketEnded` once `end` is set.
        """
        if self.end is not None:
            raise WebSocketEnded(self.end)
        protocol = self._protocol
        frames = self._frames
        payloads: list[bytes] = []
        if self._backlog:
            self._backlog = False
        else:
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except STREAM_ERRORS as exc:
                self.end = SocketEnd(
                    f"closed by peer: {describe_error(exc, handshake_done=True)}", ABNORMAL
                )
                raise WebSocketEnded(self.end) from None
            if not data:
                rest = frames.drain()
                if rest:
                    protocol.receive_data(rest)
                protocol.receive_eof()
                try:
                    self._take_events(protocol.events_received(), payloads)
                except InvalidText as exc:
                    self._fail_invalid_text(exc)
                if self.end is None and protocol.close_rcvd is None:
                    self.end = SocketEnd("closed by peer: EOF without a close frame", ABNORMAL)
                return self._received(payloads)
            # Bytes only, not the EOF: how long the peer was silent before it hung up
            # is what tells an idle cut (_core/idle_cut.py).
            self.last_received = trio.current_time()
            frames.feed(data)
        # Plain data frames are taken by ``frames`` (see _core/ws_frames.py); every other
        # frame goes to the protocol whole, and may change what counts as plain.
        try:
            while True:
                whole = frames.take(
                    payloads, plain=protocol.current_size is None and protocol.state is _OPEN
                )
                if whole is None:
                    break
                protocol.receive_data(whole)
                self._take_events(protocol.events_received(), payloads)
        except InvalidText as exc:
            self._fail_invalid_text(exc)
        return self._received(payloads)

    def _fail_invalid_text(self, exc: InvalidText) -> None:
        # RFC 6455 §8.1: fail the connection with 1007. What came before the bad
        # message is still returned; the next receive() raises WebSocketEnded, and the
        # connection ends its requests in flight (ambiguous) and redials.
        reason = str(exc)
        self._protocol.fail(INVALID_DATA, reason)
        self.end = SocketEnd(f"protocol error: {reason}", INVALID_DATA, reason)

    def _take_events(self, events: list[Any], payloads: list[bytes]) -> None:
        for frame in events:
            opcode = frame.opcode
            if opcode is _TEXT or opcode is _CONT or opcode is _BINARY:
                if opcode is _TEXT:
                    self._text.start(frame.data, final=frame.fin)
                elif opcode is _CONT:
                    self._text.feed(frame.data, final=frame.fin)
                else:
                    self._text.stop()
                payloads.append(frame.data)
            elif opcode is _PONG:
                callback = self._pongs.pop(bytes(frame.data), None)
                if callback is not None:
                    callback()
            elif opcode is _CLOSE and self.end is None:
                close = self._protocol.close_rcvd
                if close is not None:
                    self.end = SocketEnd("closed by peer", close.code, close.reason)

    def _received(self, payloads: list[bytes]) -> list[bytes]:
        protocol = self._protocol
        if self.end is None and protocol.parser_exc is not None:
            sent = protocol.close_sent
            self.end = SocketEnd(
                f"protocol error: {protocol.parser_exc}",
                sent.code if sent is not None else None,
                sent.reason if sent is not None else None,
            )
        if protocol.writes:
            self._frame_written()
        return payloads

    def _frame_written(self) -> None:
        # Drop the EOF marker (b""): the connection closes the stream itself.
        self._pending += [chunk for chunk in self._protocol.data_to_send() if chunk]
        if self.on_pending is not None and self._pending:
            self.on_pending()

    # --- sending -----------------------------------------------------------------------

    def send_text(self, payload: bytes) -> None:
        """Frame one text message (masked, C speedups); `flush` writes it.
        The caller checks `can_send` first."""
        if self._plain_out and self._protocol.state is _OPEN:
            # The protocol would do the same, at three times the cost (_core/ws_frames.py).
            self._pending.append(text_frame(payload, _MASK_KEYS.next(), apply_mask))
        else:
            self._protocol.send_text(payload)
            self._pending += self._protocol.data_to_send()

    def send_ping(self, payload: bytes, on_pong: Callable[[], None] | None = None) -> bool:
        """Frame a ping; ``on_pong`` is called when its pong arrives. False if closing."""
        try:
            self._protocol.send_ping(payload)
        except InvalidState:
            return False
        if on_pong is not None:
            if len(self._pongs) >= MAX_PINGS_AWAITED:
                # Pongs come back in order: the oldest is the least likely to come.
                del self._pongs[next(iter(self._pongs))]
            self._pongs[payload] = on_pong
        self._pending += self._protocol.data_to_send()
        return True

    def forget_ping(self, payload: bytes) -> None:
        self._pongs.pop(payload, None)

    def send_close(self, code: int, reason: str) -> bool:
        """Frame our close frame; false if one was already sent or the socket is over."""
        if self.end is not None or self._protocol.state is not State.OPEN:
            return False
        self._protocol.send_close(code, reason)
        self._pending += [chunk for chunk in self._protocol.data_to_send() if chunk]
        return True

    def write_now(self) -> bool:
        """Write what is pending as far as the stream takes it *now* (its
        ``send_nowait``), never waiting, if nobody else is writing; true when nothing is
        left. What the stream did not take stays pending, in order, for a `flush`:
        a request's own write therefore never blocks its task, and a full socket (or a
        stream that takes nothing at once, as TLS) is the writer's to wait on. Raises
        `WriteFailed`."""
        if self._writing or self.broken or not self._pending:
            return not self._pending
        chunks = self._pending
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        try:
            sent = self._send_nowait(data)
        except STREAM_ERRORS as exc:
            self.broken = True
            raise WriteFailed(describe_error(exc, handshake_done=True)) from exc
        if sent == len(data):
            self._pending = []
            return True
        self._pending = [data[sent:]]
        return False

    async def flush(self) -> None:
        """Write everything pending. If another task is writing, return at once: it
        writes what was added meanwhile before it stops. Raises `WriteFailed`."""
        if self._writing or self.broken:
            return
        self._writing = True
        self.write_started_at = trio.current_time()
        try:
            while self._pending:
                chunks, self._pending = self._pending, []
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                try:
                    await self.stream.send_all(data)
                except STREAM_ERRORS as exc:
                    self.broken = True
                    raise WriteFailed(describe_error(exc, handshake_done=True)) from exc
                except BaseException:
                    # Cancelled midway: part of a frame may be on the wire.
                    self.broken = True
                    raise
        finally:
            self._writing = False
            done, self._write_done = self._write_done, None
            if done is not None:
                done.set()

    async def wait_write_done(self) -> None:
        """Return once no `flush` is under way (at once if none is)."""
        if self._writing:
            if self._write_done is None:
                self._write_done = trio.Event()
            await self._write_done.wait()
