"""One WebSocket to the connector, and the three tasks that serve it.

A :class:`Connection` lives inside its own nursery (opened by the supervisor): the
reader, the writer and the pinger run there, next to trio-websocket's own reader. The
first of them to see the link end calls :meth:`Connection.end`, which resolves every
request waiting on this connection *at that moment* (ambiguous if its frame was written,
definite otherwise) and cancels the nursery. Requests are therefore bound to the socket
they were written on: none can wait on a dead socket, and none can be answered by the
next one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import trio
import trio_websocket

from .._core import outcome as _outcome
from .._core.close import ConnectionEnd
from .._core.codec import FrameDecoder, RejectedFrame, encode_frame
from .._core.config import Identity, RelayConfig
from .._core.frames import (
    CONNECTOR_FRAMES,
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundFrame,
    InterruptInbound,
    OutboundResult,
    PassthroughFrame,
)
from .._core.outcome import Outcome
from .._core.stats import RelayStats
from .liveness import LivenessStream
from .outbox import Line, Outbox
from .waiters import Expiry, Waiter

logger = logging.getLogger("trio_relay")



InboundSink = Callable[[InboundFrame | PassthroughFrame | InterruptInbound], None]


class Connection:
    def __init__(
        self,
        *,
        ws: trio_websocket.WebSocketConnection,
        transport: LivenessStream,
        nursery: trio.Nursery,
        config: RelayConfig,
        stats: RelayStats,
        on_inbound: InboundSink,
        on_end: Callable[[Connection], None],
    ) -> None:
        self.ws = ws
        self.transport = transport
        self._nursery = nursery
        self._config = config
        self._stats = stats
        self._on_inbound = on_inbound
        self._on_end = on_end
        self.outbox = Outbox(
            max_frames=config.max_queued_frames,
            max_message_bytes=config.max_message_bytes,
            on_sent=self._count_sent,
        )
        self.waiters: dict[str, Waiter] = {}
        self._expiry = Expiry(self._expired)
        self.descriptors: list[DescriptorFrame] = []
        self._identities_expected = 0
        self.handshake_done = trio.Event()
        self.ended = trio.Event()
        self.end_info: ConnectionEnd | None = None
        self.idle_acked = trio.Event()
        self._drained: trio.Event | None = None
        self._closing_info: tuple[str, int, str, bool] | None = None
        self._on_end_cancel: set[trio.CancelScope] = set()
        """Waits that must end with the connection (pings, go_idle)."""
        self.opened_at = trio.current_time()
        self.up_at: float | None = None
        """When the handshake completed; None until then."""

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> None:
        self._nursery.start_soon(self._reader)
        self._nursery.start_soon(self._writer)
        self._nursery.start_soon(self._pinger)
        self._nursery.start_soon(self._expiry.run)

    def end(
        self, cause: str, code: int | None = None, reason: str | None = None, *, by_us: bool = False
    ) -> None:
        """Mark the connection over; settle every waiter now; cancel its tasks.

        Idempotent: the first caller's account of why it ended is the one kept.
        """
        if self.end_info is not None:
            return
        # Our own close makes the reader see a close frame too; the deliberate
        # account, set before closing, wins over "closed by peer".
        if self._closing_info is not None:
            cause, code, reason, by_us = self._closing_info
        now = trio.current_time()
        self.end_info = info = ConnectionEnd(
            cause,
            code,
            reason,
            by_us=by_us,
            had_handshake=bool(self.descriptors),
            up_for=None if self.up_at is None else now - self.up_at,
        )
        self._on_end(self)
        waiters, self.waiters = self.waiters, {}
        # One outcome of each kind for all: Outcome is immutable, and a thousand
        # waiters must be settled in the moment the link is known dead.
        lost = _outcome.connection_lost(info.cause)
        unsent = _outcome.write_failed(f"connection ended before the write: {info.cause}")
        for waiter in waiters.values():
            if waiter.may_have_left:
                waiter.resolve(lost)
            else:
                waiter.abandoned = True
                waiter.resolve(unsent)
        self._wake_drain()
        self.ended.set()
        for scope in self._on_end_cancel:
            scope.cancel()
        self._nursery.cancel_scope.cancel()

    async def handshake(self, identities: Sequence[Identity], timeout: float) -> bool:
        """Send one ``hello`` per identity and wait for as many descriptors.

        True when the connection is up; false when it ended or timed out first (then it
        has been ended).
        """
        self._identities_expected = len(identities)
        for identity in identities:
            hello = Hello(identity.platform, identity.bot_id, identity.command_manifest)
            self.send_line(encode_frame(hello))
        with trio.move_on_after(timeout):
            await self.handshake_done.wait()
        if self.is_open and not self.handshake_done.is_set():
            self.end(f"handshake timeout: no descriptors within {timeout:g} s")
        if self.is_open:
            self.up_at = trio.current_time()
        return self.is_open

    @property
    def is_open(self) -> bool:
        return self.end_info is None

    # --- requests --------------------------------------------------------------------

    async def request(self, request_id: str, line: str, deadline: float, timeout: float) -> Outcome:
        """Send one ``outbound`` line and wait for its result, the deadline, or the end
        of this connection — whichever comes first."""
        if not self.is_open:
            return _outcome.write_failed("connection already ended")
        waiter = Waiter(request_id, line, deadline, timeout)
        if not self.outbox.put(waiter):
            return _outcome.queue_full(self._config.max_queued_frames)
        self.waiters[request_id] = waiter
        self._expiry.add(waiter)
        try:
            return await waiter.wait()
        except BaseException:
            # Cancelled: leave no trace, so a late result is ignored and the writer
            # skips the frame if it has not gone out yet.
            waiter.abandoned = True
            self.waiters.pop(request_id, None)
            self._wake_drain()
            raise

    def _expired(self, waiter: Waiter) -> None:
        self.waiters.pop(waiter.request_id, None)
        waiter.abandoned = True  # the writer skips it if it has not gone out yet
        waiter.resolve(_outcome.timed_out(waiter.timeout, written=waiter.may_have_left))
        self._wake_drain()

    def send_line(self, line: str) -> bool:
        """Queue a fire-and-forget frame; false if the connection cannot take it."""
        return self.is_open and self.outbox.put(Line(line))

    async def wait_drained(self) -> None:
        """Wait until no request is in flight on this connection."""
        while self.waiters and self.is_open:
            self._drained = trio.Event()
            await self._drained.wait()

    def _wake_drain(self) -> None:
        if self._drained is not None and not self.waiters:
            self._drained.set()

    async def go_idle(self, timeout: float) -> bool:
        """Send ``going_idle`` and wait for the ack; false on timeout or if the
        connection ends first."""
        if not self.idle_acked.is_set() and not self.send_line(encode_frame(GoingIdle())):
            return False
        with trio.move_on_after(timeout), trio.CancelScope() as scope:
            self._on_end_cancel.add(scope)
            try:
                await self.idle_acked.wait()
                return True
            finally:
                self._on_end_cancel.discard(scope)
        return False

    async def close(self, code: int, reason: str, cause: str, *, by_us: bool) -> None:
        """Close deliberately with ``code``; the closing handshake is bounded."""
        self._closing_info = (cause, code, reason, by_us)
        try:
            with trio.move_on_after(self._config.close_timeout):
                await self.ws.aclose(code, reason)
        finally:
            self.end(cause, code, reason, by_us=by_us)

    # --- tasks -----------------------------------------------------------------------

    async def _reader(self) -> None:
        decoder = FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=self._config.max_line_bytes)
        stats = self._stats
        try:
            while True:
                message = await self.ws.get_message()
                for frame in decoder.feed(message):
                    if type(frame) is OutboundResult:  # the hot path: replies
                        stats.frames_received += 1
                        waiter = self.waiters.pop(frame.request_id, None)
                        if waiter is not None:
                            waiter.resolve(Outcome.answered(frame.result))
                            self._expiry.prune(waiter)
                            self._wake_drain()
                    else:
                        self._dispatch(frame)
        except trio_websocket.ConnectionClosed as exc:
            if self._closing_info is not None:
                # Our own close() is under way: its closing handshake needs
                # trio-websocket's reader alive, so let close() end the connection.
                return
            close = exc.reason
            if close is None:
                self.end("closed by peer")
            else:
                self.end("closed by peer", close.code, close.reason)

    def _dispatch(self, frame: Frame | RejectedFrame) -> None:
        if isinstance(frame, RejectedFrame):
            self._stats.frames_rejected += 1
            logger.warning(
                "skipped a bad frame from the connector: %s (%r)", frame.reason, frame.sample
            )
            return
        self._stats.frames_received += 1
        if isinstance(frame, (InboundFrame, PassthroughFrame, InterruptInbound)):
            self._on_inbound(frame)
        elif isinstance(frame, DescriptorFrame):
            self.descriptors.append(frame)
            if self._identities_expected and len(self.descriptors) >= self._identities_expected:
                self.handshake_done.set()
        elif isinstance(frame, GoingIdleAck):
            self.idle_acked.set()
        else:  # a gateway-side frame type cannot reach here: the registry excludes them
            raise AssertionError(f"unhandled frame {frame!r}")

    async def _writer(self) -> None:
        try:
            await self.outbox.run_writer(self.ws.send_message, self._socket_open)
        except trio_websocket.ConnectionClosed:
            # The reader sees the same close once it has handed over every message
            # received before it (answers among them), and ends the connection then;
            # the pinger is the backstop if it never does.
            return

    def _socket_open(self) -> bool:
        return self.is_open and self.ws.closed is None

    def _count_sent(self, frames: int) -> None:
        self._stats.messages_sent += 1
        self._stats.frames_sent += frames

    async def _pinger(self) -> None:
        interval = self._config.ping_interval
        timeout = self._config.ping_timeout
        next_ping = trio.current_time() + interval
        while True:
            await trio.sleep_until(min(next_ping, self.transport.last_received + timeout))
            now = trio.current_time()
            silent_for = now - self.transport.last_received
            if silent_for >= timeout:
                self.end(f"keepalive timeout: nothing received for {silent_for:.1f} s")
                return
            if now >= next_ping:
                next_ping = now + interval
                self._nursery.start_soon(self._ping_once)

    async def _ping_once(self) -> None:
        # Bounded: a peer that never pongs but keeps sending is alive (not dropped), and
        # must not leave one task waiting for a pong behind per ping_interval.
        with trio.move_on_after(self._config.ping_timeout):
            await self.ping()

    async def ping(self) -> float | None:
        """One ping; the RTT in seconds (also kept in stats), or None if the connection
        closed first (the reader reports the close)."""
        sent_at = trio.current_time()
        with trio.CancelScope() as scope:
            # trio-websocket never wakes a pending ping when the socket dies.
            self._on_end_cancel.add(scope)
            try:
                await self.ws.ping()
            except trio_websocket.ConnectionClosed:
                return None
            finally:
                self._on_end_cancel.discard(scope)
        if scope.cancelled_caught:
            return None
        rtt = self._stats.ping_rtt = trio.current_time() - sent_at
        return rtt
