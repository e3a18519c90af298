"""One WebSocket session of the reference connector: the socket, its tasks, its end.

A [`Session`][trio_relay.testing.Session] owns everything one accepted TCP connection needs: the raw
``trio.SocketStream`` (so a test can reset it or make it fall silent), the
trio-websocket connection layered on a `GatedStream`, an `Outbox` with its
writer task, and a nursery that holds all of them. However the session ends (the peer
closes, the socket dies, the connector closes or resets it) the nursery is cancelled, so
nothing of it outlives the socket.

This module knows nothing of the relay protocol beyond "payloads in, lines out": the
connector decides what an upgrade is worth (`Admission`) and what a payload means.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    wrap_server_stream,
)

from .._core.codec import FrameDecoder, encode_frame
from .._core.frames import GATEWAY_FRAMES, Frame, Hello
from .._trio.connection.outbox import Line, Outbox
from ._gated_stream import GatedStream
from ._http_routes import HttpRoutes

logger = logging.getLogger("trio_relay.testing.connector")

ANONYMOUS = "anonymous"
"""The gateway id of sessions when the connector requires no authentication."""

CLOSE_TIMEOUT = 2.0
"""How long a close we initiate waits for the peer's closing frame before dropping TCP."""

_RECEIVE_BYTES = 1 << 16
# trio-websocket's default queue of one message couples its protocol reader to ours;
# a little slack lets it keep parsing (and answering pings) while we dispatch.
_MESSAGE_QUEUE = 16


@dataclass(frozen=True, slots=True)
class Admission:
    """The connector's verdict on an upgrade request.

    ``http_status`` set: refuse the upgrade itself with that status (no WebSocket).
    ``refuse`` set: accept the upgrade, then close at once with (code, reason), before
    any frame, which is how the contract says a connector rejects authentication.
    """

    gateway_id: str = ANONYMOUS
    http_status: int | None = None
    refuse: tuple[int, str] | None = None


def _server_text_frame(payload: bytes) -> bytes:
    """One final, unmasked text frame (RFC 6455 §5.2), whatever ``payload`` holds."""
    length = len(payload)
    if length < 126:
        head = bytes((0x81, length))
    elif length < 1 << 16:
        head = bytes((0x81, 126)) + length.to_bytes(2, "big")
    else:
        head = bytes((0x81, 127)) + length.to_bytes(8, "big")
    return head + payload


class _TrackedLine:
    """A line whose sender waits until it was handed to the socket (or the session died)."""

    __slots__ = ("done", "line")
    abandoned = False

    def __init__(self, line: str) -> None:
        self.line = line
        self.done = trio.Event()

    def mark_sending(self) -> None:
        pass

    def mark_written(self) -> None:
        self.done.set()


Admit = Callable[["Session", WebSocketRequest], Admission]
OnPayload = Callable[["Session", "str | bytes"], None]
FrameObserver = Callable[["Session", Literal["in", "out"], Frame], None]
"""Called for every frame a session receives (``"in"``) or queues to send (``"out"``)."""
SessionObserver = Callable[["Session", Literal["open", "closed"]], None]
"""Called when an accepted upgrade opens a session, and when that session is over."""


class Session:
    """One accepted WebSocket session of the reference connector.

    ``closed`` is set when the session is over; ``close_code``/``close_reason`` then say
    how: the code we sent when we closed it, the peer's code when it closed, ``1006``
    when the socket just died or was reset (``close_reason == "aborted"`` for a reset we
    injected). ``refused`` holds the reason of an upgrade accepted only to be closed.
    """

    def __init__(
        self,
        index: int,
        stream: trio.SocketStream,
        *,
        max_message_bytes: int,
        max_queued_frames: int,
        tls: ssl.SSLContext | None = None,
        observer: FrameObserver | None = None,
        http_routes: HttpRoutes | None = None,
    ) -> None:
        self.index = index
        self._http_routes = http_routes
        self.stream = stream
        self.gateway_id = ANONYMOUS
        self.ws: WebSocketConnection | None = None
        self.closed = trio.Event()
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.refused: str | None = None
        self.upgrade_headers: list[tuple[bytes, bytes]] = []
        """The headers of the upgrade request, as received (what the gateway sent)."""
        self.hellos: list[Hello] = []
        self.descriptors: dict[str, dict[str, Any]] = {}
        """platform -> the descriptor this session was sent for it."""
        self.supported_ops: dict[str, frozenset[str]] = {}
        """platform -> the ops its descriptor advertised (the legacy set when none)."""
        self.observer = observer
        self.handshaken = False
        """True once the session got its first descriptor."""
        self.idle = False
        """True after the gateway sent ``going_idle``: buffered-only delivery."""
        self.outbox = Outbox(max_frames=max_queued_frames, max_message_bytes=max_message_bytes)
        self.decoder = FrameDecoder(GATEWAY_FRAMES, max_line_bytes=max_message_bytes)
        self._max_message_bytes = max_message_bytes
        # With ``tls`` the WebSocket rides TLS over the socket (the handshake happens on
        # first use); faults still act on the raw socket underneath.
        transport: trio.abc.Stream = (
            stream if tls is None else trio.SSLStream(stream, tls, server_side=True)
        )
        self._gate = GatedStream(transport)
        self._end = trio.Event()
        self._our_close: tuple[int, str] | None = None
        self._nursery: trio.Nursery | None = None
        self._tracked: set[_TrackedLine] = set()

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else "open"
        return f"<Session #{self.index} {self.gateway_id} {state}>"

    @property
    def is_open(self) -> bool:
        """Accepted, not refused, and not (being) ended."""
        return (
            self.ws is not None
            and self.refused is None
            and not self._end.is_set()
            and not self.closed.is_set()
        )

    @property
    def peer(self) -> tuple[str, int]:
        """The gateway's address as the connector's socket sees it (while it is open)."""
        host, port, *_ = self.stream.socket.getpeername()
        return host, port

    @property
    def silent(self) -> bool:
        return not self._gate.is_open

    # --- sending ----------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        """Queue ``frame`` for the writer task (batched with whatever else is queued)."""
        if self.observer is not None:
            self.observer(self, "out", frame)
        if not self.outbox.put(Line(encode_frame(frame))):
            logger.warning("%r: outbox full, dropped a %s frame", self, frame.TYPE)

    async def send_and_wait(self, frame: Frame) -> None:
        """Queue ``frame`` and return once it was handed to the socket, or the session
        ended (a live frame on a dying session is lost, as on a real connector)."""
        item = _TrackedLine(encode_frame(frame))
        if self.observer is not None:
            self.observer(self, "out", frame)
        if self.closed.is_set() or not self.outbox.put(item):
            return
        self._tracked.add(item)
        try:
            await item.done.wait()
        finally:
            self._tracked.discard(item)

    async def send_raw(self, message: str | bytes, *, text: bool = False) -> None:
        """Send one WebSocket message verbatim, outside the outbox's batching (so it is
        not joined to other lines). Frames already handed to the writer go first, since
        trio-websocket serialises sends in FIFO order.

        ``text=True`` with ``bytes`` sends them as the payload of a *text* message, as
        they are: for a text message that is not UTF-8, which trio-websocket cannot
        send (it encodes a ``str``). The session frames that one itself."""
        if self.ws is None or not self.is_open:
            raise RuntimeError(f"{self!r} is not open")
        if text and isinstance(message, bytes):
            await self._gate.send_all(_server_text_frame(message))
        else:
            await self.ws.send_message(message)

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` inside the session, so it is cancelled when the session
        ends."""
        if self._nursery is not None and not self.closed.is_set():
            self._nursery.start_soon(fn, *args)

    # --- faults -----------------------------------------------------------------------

    def silence(self) -> None:
        self._gate.close_gate()

    def resume(self) -> None:
        self._gate.open_gate()

    def ignore_pings(self, ignore: bool = True) -> None:
        self._gate.drop_pongs = ignore

    def request_close(self, code: int, reason: str) -> None:
        """Ask the session to close with ``code`` and ``reason``; ``await closed.wait()``
        for the end."""
        if self._end.is_set():
            return
        self._our_close = (code, reason)
        self._record_end(code, reason)
        self._end.set()
        if self.ws is None and self._nursery is not None:
            # Not upgraded yet: there is no WebSocket to close, only TCP.
            self._nursery.cancel_scope.cancel()

    def abort(self) -> None:
        """Reset the TCP connection now (RST, not FIN) and end the session."""
        if self.closed.is_set():
            return
        self._record_end(1006, "aborted")
        sock = self.stream.socket
        # Linger on, timeout 0: close() discards unsent data and sends RST. (OSError:
        # the socket is already closed, and there is nothing left to reset.)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Closing the trio socket wakes every task blocked on it (ClosedResourceError).
        sock.close()
        self._end.set()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # --- lifetime ---------------------------------------------------------------------

    async def run(
        self, admit: Admit, on_payload: OnPayload, on_open: Callable[[Session], None]
    ) -> None:
        """Serve the session until it ends (the reference connector calls this, with its
        ``admit``, ``on_payload`` and ``on_open`` callbacks). Exceptions of this session
        propagate to the caller, which logs them; they never reach other sessions."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self._end.is_set():  # stopped before it even started
                    nursery.cancel_scope.cancel()
                nursery.start_soon(self._watch_stream)
                if self._http_routes is not None and await self._http_routes.serve(self._gate):
                    # A plain HTTP connection to the connector's routes, served whole.
                    nursery.cancel_scope.cancel()
                    return
                request = await wrap_server_stream(
                    nursery,
                    self._gate,
                    message_queue_size=_MESSAGE_QUEUE,
                    max_message_size=self._max_message_bytes,
                    receive_buffer_size=_RECEIVE_BYTES,
                )
                self.upgrade_headers = list(request.headers)
                ws = await self._upgrade(request, admit(self, request))
                if ws is not None:
                    on_open(self)
                    nursery.start_soon(self._read, ws, on_payload)
                    nursery.start_soon(self._write, ws)
                    await self._end.wait()
                    await self._finish(ws)
                nursery.cancel_scope.cancel()
        finally:
            if self.close_code is None:
                self._record_end(1006, None)
            for item in self._tracked:
                item.done.set()
            # Synchronous close (no checkpoint) so that a cancelled task still reaches
            # closed.set(); close() on a trio socket wakes anyone still blocked on it.
            self.stream.socket.close()
            self.closed.set()

    async def _upgrade(
        self, request: WebSocketRequest, admission: Admission
    ) -> WebSocketConnection | None:
        if admission.http_status is not None:
            await request.reject(admission.http_status, body=b"not found\n")
            return None
        self.gateway_id = admission.gateway_id
        ws = await request.accept()
        self.ws = ws
        if admission.refuse is not None:
            code, reason = admission.refuse
            self.refused = reason
            self._our_close = admission.refuse
            self._record_end(code, reason)
            await self._close_ws(ws, code, reason)
            return None
        return ws

    async def _watch_stream(self) -> None:
        # Whatever stage the session is in, a dead TCP stream ends it; before the
        # upgrade this is the only thing that notices (trio-websocket's request future
        # is never resolved when the peer sends garbage or hangs up mid-request).
        await self._gate.finished.wait()
        if self.ws is None and self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        self._peer_ended()

    async def _read(self, ws: WebSocketConnection, on_payload: OnPayload) -> None:
        try:
            while True:
                on_payload(self, await ws.get_message())
        except ConnectionClosed:
            self._peer_ended()

    async def _write(self, ws: WebSocketConnection) -> None:
        try:
            await self.outbox.run_writer(ws.send_message, lambda: ws.closed is None)
        except ConnectionClosed:
            self._peer_ended()

    def _peer_ended(self) -> None:
        if self._end.is_set():
            return
        reason = self.ws.closed if self.ws is not None else None
        if reason is not None:
            self._record_end(reason.code, reason.reason)
        else:
            self._record_end(1006, None)
        self._end.set()

    async def _finish(self, ws: WebSocketConnection) -> None:
        if self._our_close is not None and ws.closed is None:
            await self._close_ws(ws, *self._our_close)

    async def _close_ws(self, ws: WebSocketConnection, code: int, reason: str) -> None:
        # An explicit close overrides silence: the closing frame must be able to leave,
        # and the peer's answer to arrive.
        self._gate.open_gate()
        # Until our Close frame is written, only its own deadline may stop the close
        # (a peer that never reads). A ping arriving after aclose() framed the Close
        # makes trio-websocket's reader answer with a Pong that wsproto refuses
        # (LocalProtocolError); the reader's crash cancels the session's nursery, and
        # an aclose() cancelled while still waiting for the stream dropped TCP with the
        # frame unsent: the peer saw an EOF without a close frame. Once the frame is
        # out, the wait for the answer is CLOSE_TIMEOUT, and the session's end may cut
        # it short (the peer has what it needs to know the close was ours).
        with trio.CancelScope(deadline=trio.current_time() + CLOSE_TIMEOUT, shield=True) as scope:

            def sent() -> None:
                scope.shield = False
                scope.deadline = trio.current_time() + CLOSE_TIMEOUT

            self._gate.on_close_sent = sent
            try:
                await ws.aclose(code, reason or None)
            finally:
                self._gate.on_close_sent = None

    def _record_end(self, code: int, reason: str | None) -> None:
        if self.close_code is None:
            self.close_code = code
            self.close_reason = reason
