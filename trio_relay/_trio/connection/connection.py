"""One WebSocket to the connector, and the tasks that serve it.

A :class:`Connection` lives inside its own nursery (opened by ``serve.py``). An idle
connection runs two tasks: the *reader* (socket bytes → WebSocket frames → relay frames,
in that one task) and the *timer* (pings, the silence deadline and request deadlines).
The *writer* starts only when there is something to write that a request could not
write itself, and ends when the box is empty again: a request writes directly when the
socket is idle and no burst is under way (nothing to batch with), or when it is large
(:data:`LARGE_FRAME_BYTES`: its bytes, not the write, are the cost), and otherwise
queues its frame for the writer, which packs a burst into few messages and one write.

The first task to see the link end calls :meth:`Connection.end`, which resolves every
request waiting on this connection *at that moment* (ambiguous if its frame may have
left, definite otherwise) and cancels the nursery. Requests are therefore bound to the
socket they were written on: none can wait on a dead socket, and none can be answered by
the next one. A result only settles a request whose frame has started to leave (see
docs/protocol.md, "Frames"): an answer to a frame not yet written is a forgery or a bug
of the peer, counted as rejected and ignored.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable

import trio

from ..._core import outcome as _outcome
from ..._core.close import ConnectionEnd
from ..._core.codec import FrameDecoder, RejectedFrame, encode_frame
from ..._core.config import RelayConfig
from ..._core.descriptor import Descriptor
from ..._core.frames import (
    CONNECTOR_FRAMES,
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    InboundFrame,
    InterruptInbound,
    OutboundResult,
    PassthroughFrame,
)
from ..._core.outcome import Outcome
from ..._core.stats import RelayStats
from ..link.websocket import WebSocket, WebSocketEnded
from .handshake import Handshake
from .outbox import Line, Outbox
from .waiters import Expiry, Waiter

logger = logging.getLogger("trio_relay")

READER_TASK = f"{__name__}.Connection._reader"

LARGE_FRAME_BYTES = 4096
"""A request at least this large writes itself on an idle socket even in a burst: its
bytes, not the system call, are the cost, and written at once they reach the connector
while the rest of the burst is still being encoded (measured at 10 KiB, 16-way: batched,
client and connector waited on each other, 69% and 32% busy)."""
"""The reader's task name, made once (trio formats a new string per task otherwise)."""

InboundSink = Callable[[InboundFrame | PassthroughFrame | InterruptInbound], None]

class Connection(Handshake):
    def __init__(
        self,
        *,
        ws: WebSocket,
        nursery: trio.Nursery,
        config: RelayConfig,
        stats: RelayStats,
        on_inbound: InboundSink,
        on_end: Callable[[Connection], None],
    ) -> None:
        self.ws = ws
        ws.on_pending = self._start_writer
        self._nursery = nursery
        self._config = config
        self._stats = stats
        self._on_inbound = on_inbound
        self._on_end = on_end
        self.outbox = Outbox(
            max_frames=config.max_queued_frames,
            max_message_bytes=config.max_message_bytes,
            on_put=self._start_writer,  # whoever queues (acks go straight to the box)
        )
        self.waiters: dict[str, Waiter] = {}
        self._expiry = Expiry(self._expired)
        self.descriptors: dict[str, Descriptor] = {}
        """Platform → descriptor, for the hello'd platforms only, in arrival order."""
        self._platforms: tuple[str, ...] = ()
        # The events below are made only by whoever waits on them: an idle connection
        # needs none, and each (an Event is ~270 bytes) would be held by every idle relay.
        self._descriptor_came: trio.Event | None = None
        """Made by the handshake's wait for the first descriptor, dropped after it."""
        self._all_descriptors: trio.Event | None = None
        """Made by :meth:`wait_all_descriptors` (several identities only)."""
        self._ended: trio.Event | None = None
        """Made by :meth:`wait_ended` (a deliberate close waits for the peer's echo)."""
        self.end_info: ConnectionEnd | None = None
        self._idle_acked: trio.Event | None = None
        """Made by the first go_idle: most connections never go idle."""
        self._drained: trio.Event | None = None
        self._closing_info: tuple[str, int, str, bool] | None = None
        self._on_end_cancel: set[trio.CancelScope] | None = None
        """Waits that must end with the connection (pings, go_idle); made by the first."""
        self._writer_running = False
        self.burst = False
        """More than one request is likely to be made in this scheduler pass, so they
        queue for the writer (one write for all) instead of writing one by one: set by
        a request's direct write, and by the reader when one read settled several
        requests (their tasks run next, and typically request again); cleared by the
        writer's next batch and by a read that settled at most one. (Trio's
        ``tasks_runnable`` cannot tell: the tasks of the pass under way are not
        counted in it.)"""
        self._write_failed_at: float | None = None
        self._ping_ids = itertools.count()
        self.opened_at = trio.current_time()
        self.up_at: float | None = None
        """When the first descriptor arrived; None until then."""

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> None:
        """Start the reader. The timer is not a task of its own: the task serving the
        connection runs it (:meth:`run_timer`) once the handshake is done — one task
        fewer per idle connection."""
        self._nursery.start_soon(self._reader, name=READER_TASK)

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
        if self._ended is not None:
            self._ended.set()
        for scope in self._on_end_cancel or ():
            scope.cancel()
        self._nursery.cancel_scope.cancel()

    @property
    def is_open(self) -> bool:
        return self.end_info is None

    async def wait_ended(self) -> None:
        """Return once :meth:`end` has been called (at once if it has)."""
        if self.end_info is None:
            if self._ended is None:
                self._ended = trio.Event()
            await self._ended.wait()

    def cancel_on_end(self, scope: trio.CancelScope) -> None:
        """Have ``scope`` cancelled when the connection ends (a wait that must not
        outlive it); :meth:`forget_on_end` when the wait is over."""
        if self._on_end_cancel is None:
            self._on_end_cancel = set()
        self._on_end_cancel.add(scope)

    def forget_on_end(self, scope: trio.CancelScope) -> None:
        if self._on_end_cancel is not None:
            self._on_end_cancel.discard(scope)

    # --- requests --------------------------------------------------------------------

    async def request(
        self, request_id: str, line: bytes, deadline: float, timeout: float
    ) -> Outcome:
        """Send one ``outbound`` line and wait for its result, the deadline, or the end
        of this connection — whichever comes first."""
        if not self.is_open:
            return _outcome.write_failed("connection already ended")
        waiter = Waiter(request_id, line, deadline, timeout)
        ws = self.ws
        # Only on plain TCP, which takes a write without waiting: on any other stream
        # (TLS, a test's wrapper) a request that wrote itself could block on a full
        # socket past its own deadline, so its frame goes to the writer instead.
        direct = (
            ws.can_send_now
            and not self._writer_running
            and (not self.burst or len(line) >= LARGE_FRAME_BYTES)
            and trio.current_effective_deadline() > -math.inf  # not cancelled already
        )
        if not direct and not self.outbox.put(waiter):
            return _outcome.queue_full(self._config.max_queued_frames)
        self.waiters[request_id] = waiter
        self._expiry.add(waiter)
        try:
            if direct:
                self._write_now(waiter)
            return await waiter.wait()
        except BaseException:
            # Cancelled: leave no trace, so a late result is ignored and the writer
            # skips the frame if it has not gone out yet.
            waiter.abandoned = True
            self.waiters.pop(request_id, None)
            self._wake_drain()
            raise

    def _write_now(self, waiter: Waiter) -> None:
        # On an idle plain-TCP socket, alone (no burst to batch with) or large (its bytes
        # are the cost): writing here saves the writer's wake-up. What the socket does
        # not take at once is left for the writer, so the request's own deadline is
        # never stuck behind a full socket.
        waiter.may_have_left = True  # (Waiter.mark_sending, inlined on the hot path)
        self.burst = True
        self._send_now(waiter.line, 1)
        waiter.line = b""  # (Waiter.mark_written)

    def _expired(self, waiter: Waiter) -> None:
        self.waiters.pop(waiter.request_id, None)
        waiter.abandoned = True  # the writer skips it if it has not gone out yet
        waiter.resolve(_outcome.timed_out(waiter.timeout, written=waiter.may_have_left))
        self._wake_drain()

    def send_line(self, line: bytes) -> bool:
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
        if self._idle_acked is None:
            self._idle_acked = trio.Event()
        acked = self._idle_acked
        if not acked.is_set() and not self.send_line(encode_frame(GoingIdle()).encode()):
            return False
        with trio.move_on_after(timeout), trio.CancelScope() as scope:
            self.cancel_on_end(scope)
            try:
                await acked.wait()
                return True
            finally:
                self.forget_on_end(scope)
        return False

    async def close(self, code: int, reason: str, cause: str, *, by_us: bool) -> None:
        """Close deliberately with ``code``: our close frame, then the peer's answer
        (or EOF), within ``close_timeout``; then the connection is over either way."""
        self._closing_info = (cause, code, reason, by_us)
        try:
            if self.is_open and self.ws.send_close(code, reason):
                self._start_writer()
                with trio.move_on_after(self._config.close_timeout):
                    await self.wait_ended()
        finally:
            self.end(cause, code, reason, by_us=by_us)

    # --- tasks -----------------------------------------------------------------------

    async def _reader(self) -> None:
        decoder = FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=self._config.max_line_bytes)
        stats = self._stats
        waiters = self.waiters
        receive = self.ws.receive
        payload: bytes | None
        frame: Frame | RejectedFrame | None
        waiter: Waiter | None
        # The task counts itself here, in its own frame: a wrapper coroutine would be
        # one more suspended frame (~250 bytes) held by every idle relay.
        stats.tasks += 1
        stats.connection_tasks += 1
        try:
            while True:
                settled = 0
                for payload in await receive():
                    for frame in decoder.feed(payload):
                        if type(frame) is OutboundResult:  # the hot path: replies
                            waiter = waiters.get(frame.request_id)
                            if waiter is not None and waiter.may_have_left:
                                stats.frames_received += 1
                                del waiters[frame.request_id]
                                waiter.resolve(Outcome.answered(frame.result))
                                settled += 1
                                self._expiry.prune(waiter)
                                if self._drained is not None:
                                    self._wake_drain()
                            elif waiter is not None:
                                self._reject("a result for a request not yet sent", frame)
                            else:
                                stats.frames_received += 1  # late or unknown: ignored
                        else:
                            self._dispatch(frame)
                self.burst = settled > 1
                waiters = self.waiters  # end() swaps the dict
                # Not held while waiting for the next read: a suspended reader would
                # keep its last frame (a descriptor, an inbound message) alive in every
                # idle relay otherwise, about 1.2 KB each.
                payload = frame = waiter = None
        except WebSocketEnded as exc:
            end = exc.end
            if self.ws.has_pending:
                # Our answer to the peer's close (or the close of a protocol failure):
                # send it, bounded, then end.
                with trio.move_on_after(self._config.close_timeout):
                    await self._flush_quietly()
            self.end(end.cause, end.code, end.reason)
        finally:
            stats.tasks -= 1
            stats.connection_tasks -= 1

    def _reject(self, reason: str, frame: Frame | None) -> None:
        self._stats.frames_rejected += 1
        logger.warning("skipped a frame from the connector: %s (%r)", reason, frame)

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
            self._add_descriptor(frame)
        elif isinstance(frame, GoingIdleAck):
            if self._idle_acked is not None:  # an ack we never asked for changes nothing
                self._idle_acked.set()
        else:  # a gateway-side frame type cannot reach here: the registry excludes them
            raise AssertionError(f"unhandled frame {frame!r}")
