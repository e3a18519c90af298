"""The relay's WebSocket client: the sans-I/O ``ClientProtocol`` of ``websockets`` over a
byte stream, driven by the connection's own tasks.

This is the only module that imports the WebSocket library. The rest of the shell sees
:func:`upgrade` (stream in, :class:`WebSocket` out, or :class:`UpgradeFailed` saying how
the server refused) and the :class:`WebSocket` it returns:

- :meth:`WebSocket.receive` reads once from the socket and returns the data payloads
  that read completed, in order. It runs in the caller's task (the connection's reader):
  no extra task or channel sits between the socket and the frame decoder. Pongs are
  matched here; a ping from the peer or its close frame leaves an answer *pending*.
- :meth:`WebSocket.send_text`, :meth:`send_ping` and :meth:`send_close` only frame
  bytes into the pending buffer; :meth:`flush` writes them. Whoever flushes writes
  everything pending, in the order it was framed, and one flush runs at a time, so the
  reader's pong, the writer's batch and a request's direct write never interleave.
- The end is typed: once the peer closes, the stream fails or the protocol breaks,
  :attr:`WebSocket.end` holds a :class:`SocketEnd` and :meth:`receive` raises
  :class:`WebSocketEnded` — after it has returned every payload read before the end.

Nothing here decides policy (timeouts, what a refusal means for the redial); the
connection and ``_core/dial_failure.py`` do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import trio
from websockets.client import ClientProtocol
from websockets.exceptions import (
    InvalidHandshake,
    InvalidHeader,
    InvalidMessage,
    InvalidState,
    InvalidStatus,
    InvalidUpgrade,
    NegotiationError,
)
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import WebSocketURI

from .._core.dial_failure import Refusal, bad_handshake, describe_error, refusal
from .._core.dial_failure import retry_after_seconds as _retry_after
from .._core.endpoint import ByteStream, Endpoint
from .socket_end import (
    ABNORMAL,
    STREAM_ERRORS,
    SocketEnd,
    UpgradeFailed,
    WebSocketEnded,
    WriteFailed,
    upgrade_headers,
)
from .socket_stream import SocketStream

__all__ = [
    "STREAM_ERRORS",
    "SocketEnd",
    "UpgradeFailed",
    "WebSocket",
    "WebSocketEnded",
    "WriteFailed",
    "upgrade",
    "upgrade_headers",
]

RECEIVE_SIZE = 1 << 16
"""Bytes asked of the stream per read: big enough that a burst of results is one read."""

MAX_PINGS_AWAITED = 8
"""Pings whose pong we still watch for; a peer that never pongs costs no more."""

_TEXT, _BINARY, _CONT, _PING, _PONG, _CLOSE = (
    Opcode.TEXT,
    Opcode.BINARY,
    Opcode.CONT,
    Opcode.PING,
    Opcode.PONG,
    Opcode.CLOSE,
)


class _Quiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The protocol's logger: never at DEBUG, where it would print the upgrade's
    headers (the bearer token among them) whenever a user debugs their own program."""

    def isEnabledFor(self, level: int) -> bool:
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_LOGGER = _Quiet(logging.getLogger("trio_relay.websocket"), {})


class WebSocket:
    """One client WebSocket, open. See the module docstring for who calls what."""

    __slots__ = (
        "_backlog",
        "_pending",
        "_pongs",
        "_protocol",
        "_send_nowait",
        "_write_done",
        "_writing",
        "broken",
        "end",
        "last_received",
        "on_pending",
        "stream",
        "write_started_at",
    )

    def __init__(self, stream: ByteStream, protocol: ClientProtocol, backlog: list[Any]) -> None:
        self.stream = stream
        self._protocol = protocol
        self._backlog = backlog
        """Frames that arrived in the same read as the ``101``."""
        self._pending: list[bytes] = []
        self._writing = False
        self._write_done: trio.Event | None = None
        self.write_started_at = 0.0
        """When the :meth:`flush` under way began (meaningful while :attr:`writing`)."""
        self._pongs: dict[bytes, Callable[[], None]] = {}
        self.end: SocketEnd | None = None
        self.broken = False
        """A write was cut off midway: nothing more may be written."""
        self.last_received = trio.current_time()
        """When any byte last arrived: the connection's proof of life."""
        self.on_pending: Callable[[], None] | None = None
        """Called when receiving framed an answer (pong, close echo) that needs a flush."""
        self._send_nowait = stream.send_nowait if isinstance(stream, SocketStream) else None

    # --- state -------------------------------------------------------------------------

    @property
    def can_send(self) -> bool:
        """Open for data frames (not closing, not ended, not broken)."""
        return self.end is None and not self.broken and self._protocol.state is State.OPEN

    @property
    def can_write_now(self) -> bool:
        """The stream takes a write without waiting (:meth:`write_now`): plain TCP."""
        return self._send_nowait is not None

    @property
    def idle(self) -> bool:
        """Nothing pending and nobody writing: a write now goes straight out."""
        return not self._writing and not self._pending

    @property
    def writing(self) -> bool:
        """A :meth:`flush` is under way (in some task)."""
        return self._writing

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    @property
    def pending_bytes(self) -> int:
        return sum(len(chunk) for chunk in self._pending)

    @property
    def closing(self) -> bool:
        """We sent our close frame (or the protocol failed the connection)."""
        return self._protocol.close_sent is not None

    # --- receiving ---------------------------------------------------------------------

    async def receive(self) -> list[bytes]:
        """Read once; the payloads of the data frames completed, in order.

        Fragments come as they arrive (newline-delimited JSON needs no message
        boundaries). Raises :class:`WebSocketEnded` once :attr:`end` is set.
        """
        if self.end is not None:
            raise WebSocketEnded(self.end)
        protocol = self._protocol
        if self._backlog:
            events, self._backlog = self._backlog, []
        else:
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except STREAM_ERRORS as exc:
                self.end = SocketEnd(f"closed by peer: {describe_error(exc)}", ABNORMAL)
                raise WebSocketEnded(self.end) from None
            self.last_received = trio.current_time()
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            events = protocol.events_received()
            if not data and self.end is None and protocol.close_rcvd is None:
                self.end = SocketEnd("closed by peer: EOF without a close frame", ABNORMAL)
        payloads: list[bytes] = []
        for frame in events:
            opcode = frame.opcode
            if opcode is _TEXT or opcode is _CONT or opcode is _BINARY:
                payloads.append(frame.data)
            elif opcode is _PONG:
                callback = self._pongs.pop(bytes(frame.data), None)
                if callback is not None:
                    callback()
            elif opcode is _CLOSE and self.end is None:
                close = protocol.close_rcvd
                if close is not None:
                    self.end = SocketEnd("closed by peer", close.code, close.reason)
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
        """Frame one text message (masked, C speedups); :meth:`flush` writes it.
        The caller checks :attr:`can_send` first."""
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

    @property
    def pings_outstanding(self) -> int:
        return len(self._pongs)

    def send_close(self, code: int, reason: str) -> bool:
        """Frame our close frame; false if one was already sent or the socket is over."""
        if self.end is not None or self._protocol.state is not State.OPEN:
            return False
        self._protocol.send_close(code, reason)
        self._pending += [chunk for chunk in self._protocol.data_to_send() if chunk]
        return True

    def write_now(self) -> bool:
        """Write what is pending as far as the socket takes it *now*, never waiting
        (only where :attr:`can_write_now`, and nobody else is writing); true when nothing
        is left. What the socket did not take stays pending, in order, for a
        :meth:`flush`: a request's own write therefore never blocks its task, and a full
        socket is the writer's to wait on. Raises :class:`WriteFailed`."""
        send_nowait = self._send_nowait
        if send_nowait is None or self._writing or self.broken or not self._pending:
            return not self._pending
        chunks = self._pending
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        try:
            sent = send_nowait(data)
        except STREAM_ERRORS as exc:
            self.broken = True
            raise WriteFailed(describe_error(exc)) from exc
        if sent == len(data):
            self._pending = []
            return True
        self._pending = [data[sent:]]
        return False

    async def flush(self) -> None:
        """Write everything pending. If another task is writing, return at once: it
        writes what was added meanwhile before it stops. Raises :class:`WriteFailed`."""
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
                    raise WriteFailed(describe_error(exc)) from exc
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
        """Return once no :meth:`flush` is under way (at once if none is)."""
        if self._writing:
            if self._write_done is None:
                self._write_done = trio.Event()
            await self._write_done.wait()


def _uri(endpoint: Endpoint) -> WebSocketURI:
    path, _, query = endpoint.resource.partition("?")
    return WebSocketURI(endpoint.secure, endpoint.host, endpoint.port, path or "/", query)


async def upgrade(
    stream: ByteStream,
    endpoint: Endpoint,
    *,
    headers: Sequence[tuple[str, str]],
    max_message_bytes: int,
    compression: bool = False,
) -> WebSocket:
    """The WebSocket upgrade over ``stream``; the caller bounds it in time.

    Raises :class:`UpgradeFailed` for any answer but a valid ``101`` — at once, also
    for an EOF, a reset or garbage instead of an HTTP response — and lets the stream's
    own errors through. Redirects are not followed.
    """
    protocol = ClientProtocol(
        _uri(endpoint),
        extensions=[ClientPerMessageDeflateFactory()] if compression else None,
        max_size=max_message_bytes,
        logger=_LOGGER,
    )
    request = protocol.connect()
    for name, value in headers:
        request.headers[name] = value
    protocol.send_request(request)
    await stream.send_all(b"".join(protocol.data_to_send()))
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except STREAM_ERRORS as exc:
            raise UpgradeFailed(
                Refusal(f"upgrade failed: {describe_error(exc)} before the server answered")
            ) from None
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        events = protocol.events_received()
        if protocol.handshake_exc is not None:
            raise _refused(protocol.handshake_exc, events) from None
        if events:
            # The protocol's parser keeps the 101 response alive for the connection's
            # whole life (a local of its generator); its headers are of no further use,
            # so they are dropped here rather than held by every idle relay.
            response = events[0]
            if isinstance(response, Response):
                response.headers.clear()
            return WebSocket(stream, protocol, events[1:])
        if not data:
            raise UpgradeFailed(Refusal("upgrade failed: connection closed before the answer"))


def _refused(exc: Exception, events: list[Any]) -> UpgradeFailed:
    response = events[0] if events and isinstance(events[0], Response) else None
    if isinstance(exc, InvalidStatus):
        response = exc.response
        status = response.status_code
        retry_after = _retry_after(response.headers.get("Retry-After"), now=time.time())
        return UpgradeFailed(refusal(status, response.reason_phrase, retry_after), status)
    if isinstance(exc, InvalidMessage):
        cause = exc.__cause__
        if isinstance(cause, EOFError):
            detail = "connection closed before a complete HTTP answer"
        else:
            detail = f"not an HTTP answer ({cause or exc})"
        return UpgradeFailed(Refusal(f"upgrade failed: {detail}"))
    answered = response.status_code if response is not None else None
    if isinstance(exc, (InvalidHeader, InvalidUpgrade, NegotiationError, InvalidHandshake)):
        return UpgradeFailed(bad_handshake(str(exc)), answered)
    return UpgradeFailed(bad_handshake(f"{type(exc).__name__}: {exc}"), answered)
