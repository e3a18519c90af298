"""One WebSocket to the connector: the Trio shell around a `RelayProtocol`.

The protocol object (``_core/protocol.py``) decides everything about the relay
protocol on this connection: what a frame means, which result settles which request,
what the end means for each request, when a request has timed out. A
`Connection` carries out its answers with three pieces of Trio code around one
`WebSocket`:

- the **reader** (a task): socket bytes → WebSocket messages → ``protocol.receive`` →
  wake the requests it settled, hand deliveries to the inbound pipeline, announce the
  link up (``on_up``) as it reads the first descriptor;
- the **writer** (a task started only when there is something to write that a request
  could not write itself, ending when the outbox is empty again): packs a burst into
  few messages and one write. A request writes directly when the socket takes bytes
  now and no burst is under way (nothing to batch with), or when it is large
  (`LARGE_FRAME_BYTES`: its bytes, not the write, are the cost);
- the **timer** (run in the task that serves the connection, one task fewer per idle
  relay): pings, the silence deadline, stalled or failed writes, and the protocol's
  request deadlines.

An idle connection therefore runs two tasks, the reader and the serving task.

The first task to see the link end calls `Connection.end`: the protocol settles
every request open at that moment (ambiguous if its frame may have left, definite
otherwise), they are woken, the sleeping timer is woken to return, and the connection's
nursery is cancelled. Requests are
bound to the socket they were written on: none can wait on a dead socket, and none can
be answered by the next one.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Callable, Sequence

import trio

from ..._core import outcome as _outcome
from ..._core.close import ConnectionEnd
from ..._core.config import Identity
from ..._core.descriptor import Descriptor
from ..._core.frames import InboundFrame, InterruptInbound, PassthroughFrame
from ..._core.outcome import Outcome
from ..._core.protocol import AllDescriptors, Event, IdleAcked, LinkUp, RelayProtocol, Request
from ..._core.settings import ConnectionSettings
from ..._core.stats import RelayStats
from ..._core.telemetry import Telemetry
from ..link.websocket import WebSocket, WebSocketEnded, WriteFailed
from .outbox import MAX_BATCH_FRAMES, Line, Outbox, Outgoing

logger = logging.getLogger("trio_relay")

READER_TASK = f"{__name__}.Connection._reader"
"""The reader's task name, made once (trio formats a new string per task otherwise)."""
WRITER_TASK = f"{__name__}.Connection._writer"
"""The writer's, likewise: it is started once per burst."""

LARGE_FRAME_BYTES = 4096
"""A request at least this large writes itself on an idle socket even in a burst: its
bytes, not the system call, are the cost, and written at once they reach the connector
while the rest of the burst is still being encoded (measured at 10 KiB, 16-way: batched,
client and connector waited on each other, 69% and 32% busy)."""

FLUSH_BYTES = 1 << 16
"""The writer writes once this much is framed, instead of framing a whole burst first."""

InboundSink = Callable[[InboundFrame | PassthroughFrame | InterruptInbound], None]

_current_task = trio.lowlevel.current_task
_wait_task_rescheduled = trio.lowlevel.wait_task_rescheduled
_reschedule = trio.lowlevel.reschedule
_current_statistics = trio.lowlevel.current_statistics


def abort_sleep(_: object) -> trio.lowlevel.Abort:
    """For ``wait_task_rescheduled``: a sleep that any cancellation ends (what
    ``trio.sleep_forever()`` does, without its frame)."""
    return trio.lowlevel.Abort.SUCCEEDED


def wake(request: Request) -> None:
    """Wake the task waiting on ``request`` (settled by the protocol), if it still is.

    The waiting task ([`Relay.request`][trio_relay.Relay.request]) sets ``request.handle`` to
    itself and marks
    its sleep with ``custom_sleep_data = request``; Trio clears that
    whenever the task is rescheduled, a cancellation included, so a request settled
    between its caller's cancellation and the caller running again is not woken twice.
    """
    task = request.handle
    if task is not None:
        request.handle = None
        if task.custom_sleep_data is request:
            _reschedule(task)


class Connection:
    """One connection's reader, writer and timer around its `RelayProtocol`."""

    def __init__(
        self,
        *,
        ws: WebSocket,
        nursery: trio.Nursery,
        settings: ConnectionSettings,
        stats: RelayStats,
        on_inbound: InboundSink,
        on_up: Callable[[Connection], None],
        on_end: Callable[[Connection], None],
        telemetry: Telemetry | None = None,
    ) -> None:
        self.ws = ws
        ws.on_pending = self._start_writer
        self.protocol = RelayProtocol(stats, max_line_bytes=settings.max_line_bytes)
        self._nursery = nursery
        self._settings = settings
        self._stats = stats
        self._on_inbound = on_inbound
        self._on_up = on_up
        self._on_end = on_end
        self._telemetry = telemetry
        self.outbox = Outbox(
            max_frames=settings.max_queued_frames,
            max_message_bytes=settings.max_message_bytes,
            on_put=self._start_writer,  # whoever queues (acks go straight to the box)
        )
        # The events below are made only by whoever waits on them: an idle connection
        # needs none, and each (an Event is ~270 bytes) would be held by every idle relay.
        self._descriptor_came: trio.Event | None = None
        """Made by the handshake's wait for the first descriptor, dropped after it."""
        self._all_descriptors: trio.Event | None = None
        """Made by `wait_all_descriptors` (several identities only)."""
        self._ended: trio.Event | None = None
        """Made by `wait_ended` (a deliberate close waits for the peer's echo)."""
        self._idle_acked: trio.Event | None = None
        """Made by the first go_idle: most connections never go idle."""
        self._drained: trio.Event | None = None
        self._on_end_cancel: set[trio.CancelScope] | None = None
        """Waits that must end with the connection (pings, go_idle); made by the first."""
        self._timer_sleep: trio.CancelScope | None = None
        """The scope of the timer's current sleep: a request with an earlier deadline
        shortens it."""
        self._timer_task: trio.lowlevel.Task | None = None
        """The task running the timer: while it sleeps (marked by its ``custom_sleep_data``,
        which Trio clears on any wake-up), `end` wakes it to return instead of
        letting the nursery's cancellation raise through it (see `end`)."""
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
        """When the first descriptor arrived (and ``on_up`` was called); None until then."""

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> None:
        """Start the reader. The timer is not a task of its own: the task serving the
        connection runs it (`run_timer`) once the handshake is done."""
        self._nursery.start_soon(self._reader, name=READER_TASK)

    def end(
        self, cause: str, code: int | None = None, reason: str | None = None, *, by_us: bool = False
    ) -> None:
        """Mark the connection over: the protocol settles every open request, they are
        woken now, and the connection's tasks are cancelled.

        Idempotent: the first caller's account of why it ended is the one kept (a
        deliberate close's account, given to `close`, wins over all)."""
        up_for = None if self.up_at is None else trio.current_time() - self.up_at
        settled = self.protocol.end(cause, code, reason, by_us=by_us, up_for=up_for)
        if settled is None:
            return
        self._on_end(self)
        # wake() inlined: a call less for each of the K requests settled at once.
        for request in settled:
            task = request.handle
            if task is not None:
                request.handle = None
                if task.custom_sleep_data is request:
                    _reschedule(task)
        timer = self._timer_task
        if timer is not None and timer.custom_sleep_data is self:
            # Woken, the timer returns and the serving task leaves the connection's
            # nursery plainly. Cancelled, a Cancelled would unwind through its frames
            # and the nursery's exit would gather it into an exception group only to
            # discard it (bench redial_steps, CPU from seeing a drop to dialling again,
            # as a ratio to the asyncio baseline's: 2.25x cancelled, 1.73x woken).
            _reschedule(timer)
        self._wake_drain()
        if self._ended is not None:
            self._ended.set()
        for scope in self._on_end_cancel or ():
            scope.cancel()
        self._nursery.cancel_scope.cancel()

    @property
    def end_info(self) -> ConnectionEnd | None:
        return self.protocol.end_info

    @property
    def is_open(self) -> bool:
        return self.protocol.end_info is None

    async def wait_ended(self) -> None:
        """Return once `end` has been called (at once if it has)."""
        if self.is_open:
            if self._ended is None:
                self._ended = trio.Event()
            await self._ended.wait()

    def _cancel_on_end(self, scope: trio.CancelScope) -> None:
        if self._on_end_cancel is None:
            self._on_end_cancel = set()
        self._on_end_cancel.add(scope)

    # --- handshake -------------------------------------------------------------------

    @property
    def descriptors(self) -> dict[str, Descriptor]:
        """Platform → descriptor, hello'd platforms only, in arrival order (live)."""
        return self.protocol.descriptors

    @property
    def has_all_descriptors(self) -> bool:
        return self.protocol.has_all_descriptors

    def missing_descriptors(self) -> list[str]:
        return self.protocol.missing_descriptors()

    # ASYNC109: False at the handshake deadline is the answer the supervisor classifies.
    async def handshake(self, identities: Sequence[Identity], timeout: float) -> bool:  # noqa: ASYNC109
        """Send one ``hello`` per identity and wait for the protocol's `LinkUp`
        (the first descriptor of a hello'd platform; docs/protocol.md, "Handshake"),
        which the reader announces (``on_up``) as it reads it.

        True when the connection is up; false when it ended or timed out first (then it
        has been ended).
        """
        lines = self.protocol.hellos(identities)
        if (
            self.ws.can_send_now  # (the peer may have closed already, in the 101's read)
            and len(lines) <= MAX_BATCH_FRAMES
            and sum(map(len, lines)) <= self._settings.max_message_bytes
        ):
            # A fresh socket takes the hellos at once: written here, in one message,
            # they save starting the writer (part of every redial's time).
            self._send_now(b"".join(lines), len(lines))
        else:
            for line in lines:
                self.send_line(line)
        if not self.protocol.is_up:  # (one may have come with the 101)
            came = self._descriptor_came = trio.Event()
            with trio.move_on_after(timeout):
                await came.wait()
            self._descriptor_came = None  # of no use once up: not held by idle relays
        if self.is_open and not self.protocol.is_up:
            self.end(f"handshake timeout: no descriptors within {timeout:g} s")
        return self.is_open

    async def wait_all_descriptors(self) -> None:
        """Return once every hello'd platform has its descriptor (the caller bounds it)."""
        if not self.protocol.has_all_descriptors:
            if self._all_descriptors is None:
                self._all_descriptors = trio.Event()
            await self._all_descriptors.wait()

    # --- requests --------------------------------------------------------------------

    def submit(
        self, request_id: str, line: bytes, deadline: float, timeout: float, now: float
    ) -> Request | Outcome:
        """Send one ``outbound`` line (now, or queued for the writer) and track it: the
        `Request` whose outcome the protocol will set (its result, its deadline
        or the end of this connection, whichever it sees first), or the
        [`Outcome`][trio_relay.Outcome] of a line that cannot be sent at all.

        The caller waits for the outcome in its own frame, as `wake` expects
        ([`Relay.request`][trio_relay.Relay.request]: one coroutine level fewer on every resume of
        a waiting
        task, and one frame fewer held per request in flight), and calls
        `withdraw` if it is cancelled meanwhile. ``now``: Trio's clock as the
        caller read it for ``deadline`` (one read per request)."""
        if not self.is_open:
            return _outcome.write_failed("connection already ended")
        request = Request(request_id, line, deadline, timeout)
        direct = (
            self.ws.can_send_now
            and not self._writer_running
            and (not self.burst or len(line) >= LARGE_FRAME_BYTES)
            and trio.current_effective_deadline() > -math.inf  # not cancelled already
        )
        if not direct and not self.outbox.put(request):
            return _outcome.queue_full(self._settings.max_queued_frames)
        self.protocol.add(request, now)
        sleep = self._timer_sleep
        if sleep is not None and deadline < sleep.deadline:
            sleep.deadline = deadline
        if direct:
            self._write_now(request)
        return request

    def resend(
        self, request: Request, request_id: str, line: bytes, deadline: float, now: float
    ) -> bool:
        """Send a keyed request handed back overdue once more, as ``line`` under
        ``request_id`` (its result, or a late one for an earlier id, settles it), its
        attempt ending at ``deadline``. False when it cannot go: the connection ended,
        or the outbox is full (it waits for an earlier attempt's result meanwhile)."""
        if not self.is_open or request.abandoned:
            return False
        self.protocol.again(request, request_id, deadline, now)
        sleep = self._timer_sleep
        if sleep is not None and deadline < sleep.deadline:
            sleep.deadline = deadline
        return self.send_line(line)

    def withdraw(self, request: Request) -> None:
        """The caller of a submitted request was cancelled: leave no trace, so a late
        result is ignored and the writer skips the frame if it has not gone out yet."""
        request.handle = None
        self.protocol.abandon(request)
        self._wake_drain()

    def _write_now(self, request: Request) -> None:
        # What the socket does not take at once is left for the writer, so the
        # request's own deadline is never stuck behind a full socket.
        request.may_have_left = True  # (Request.mark_sending, inlined on the hot path)
        self.burst = True
        self._send_now(request.line, 1)
        request.line = b""  # (Request.mark_written)

    def send_line(self, line: bytes) -> bool:
        """Queue a fire-and-forget frame; false if the connection cannot take it."""
        return self.is_open and self.outbox.put(Line(line))

    async def wait_drained(self) -> None:
        """Wait until no request is in flight on this connection."""
        while self.protocol.requests and self.is_open:
            self._drained = trio.Event()
            await self._drained.wait()

    def _wake_drain(self) -> None:
        if self._drained is not None and not self.protocol.requests:
            self._drained.set()

    # ASYNC109: carries Relay.go_idle's timeout=: False when no ack in time.
    async def go_idle(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Send ``going_idle`` and wait for the ack; false on timeout or if the
        connection ends first."""
        if self.protocol.idle_acked:
            return True
        if self._idle_acked is None:
            self._idle_acked = trio.Event()
        acked = self._idle_acked
        if not self.send_line(self.protocol.going_idle()):
            return False
        with trio.move_on_after(timeout), trio.CancelScope() as scope:
            self._cancel_on_end(scope)
            try:
                await acked.wait()
                return True
            finally:
                self._forget_on_end(scope)
        return False

    def _forget_on_end(self, scope: trio.CancelScope) -> None:
        if self._on_end_cancel is not None:
            self._on_end_cancel.discard(scope)

    async def close(self, code: int, reason: str, cause: str, *, by_us: bool) -> None:
        """Close deliberately with ``code``: our close frame, then the peer's answer
        (or EOF), within ``close_timeout``; then the connection is over either way."""
        self.protocol.closing(cause, code, reason, by_us=by_us)
        try:
            if self.is_open and self.ws.send_close(code, reason):
                self._start_writer()
                with trio.move_on_after(self._settings.close_timeout):
                    await self.wait_ended()
        finally:
            self.end(cause, code, reason, by_us=by_us)

    # --- the reader ------------------------------------------------------------------

    async def _reader(self) -> None:
        stats = self._stats
        receive = self.ws.receive
        protocol_receive = self.protocol.receive
        payload: bytes | None
        event: Event | None
        # The task counts itself here, in its own frame: a wrapper coroutine would be
        # one more suspended frame (~250 bytes) held by every idle relay.
        stats.tasks += 1
        stats.connection_tasks += 1
        try:
            while True:
                settled = 0
                for payload in await receive():
                    for event in protocol_receive(payload):
                        if type(event) is Request:  # the hot path: a result
                            wake(event)
                            settled += 1
                        else:
                            self._handle(event)
                if settled and self._drained is not None:
                    self._wake_drain()
                self.burst = settled > 1
                # Not held while waiting for the next read: a suspended reader would
                # keep its last event (a descriptor, an inbound message) alive in every
                # idle relay otherwise, about 1.2 KB each.
                payload = event = None
        except WebSocketEnded as exc:
            end = exc.end
            if self.ws.has_pending:
                # Our answer to the peer's close (or the close of a protocol failure):
                # send it, bounded, then end.
                with trio.move_on_after(self._settings.close_timeout):
                    with contextlib.suppress(WriteFailed):
                        await self.ws.flush()
            self.end(end.cause, end.code, end.reason)
        finally:
            stats.tasks -= 1
            stats.connection_tasks -= 1

    def _handle(self, event: Event) -> None:
        if isinstance(event, (InboundFrame, PassthroughFrame, InterruptInbound)):
            self._on_inbound(event)
        elif isinstance(event, LinkUp):
            if self.is_open:
                # Up in the reader's own step: requests may use the link the moment its
                # first descriptor is read, not a scheduler pass later, once the task
                # waiting in handshake() has run (part of every redial's time).
                self.up_at = trio.current_time()
                self._stats.missing_descriptors = []  # (a new link's: none missing yet)
                self._on_up(self)
            if self._descriptor_came is not None:
                self._descriptor_came.set()
            if self._all_descriptors is not None and self.protocol.has_all_descriptors:
                self._all_descriptors.set()
        elif isinstance(event, AllDescriptors) and self._all_descriptors is not None:
            self._all_descriptors.set()
        elif isinstance(event, IdleAcked) and self._idle_acked is not None:
            self._idle_acked.set()

    # --- the timer -------------------------------------------------------------------

    async def run_timer(self) -> None:
        """Run the timer in the caller's task (the one serving the connection) until
        the connection ends: it returns once the connection has ended, woken by
        `end` or having ended it itself (or is cancelled with the nursery).
        Pings every ``ping_interval``; ends the connection when nothing at all was
        received for ``ping_timeout`` (any byte is proof of life, so a busy peer is
        never dropped for a late pong) or a write stalled or failed; expires requests at
        their deadlines."""
        settings = self._settings
        interval, timeout = settings.ping_interval, settings.ping_timeout
        ws, protocol = self.ws, self.protocol
        next_ping = trio.current_time() + interval
        # The serving task is counted in stats.tasks already; the timer is one of the
        # connection's tasks. (One coroutine level, not a wrapper around a second.)
        self._stats.connection_tasks += 1
        task = self._timer_task = _current_task()
        try:
            while True:
                wake_at = min(next_ping, ws.last_received + timeout, protocol.next_deadline)
                if self._write_failed_at is not None:
                    wake_at = min(wake_at, self._write_failed_at + settings.close_timeout)
                # The sleep is this task's own frame, not a coroutine of ours: it is
                # where an idle connection's timer spends its life, and each level of
                # its await chain is held by every idle relay.
                with trio.CancelScope(deadline=wake_at) as self._timer_sleep:
                    task.custom_sleep_data = self  # (asleep: see end())
                    await _wait_task_rescheduled(abort_sleep)
                if not self.is_open:
                    return  # woken by end()
                now = trio.current_time()
                for request in protocol.expire(now):
                    wake(request)
                self._wake_drain()
                silent_for = now - ws.last_received
                if silent_for >= timeout:
                    self.end(f"keepalive timeout: nothing received for {silent_for:.1f} s")
                    return
                if ws.writing and now - ws.write_started_at >= timeout:
                    self.end(f"write stalled: the socket took no bytes for {timeout:g} s")
                    return
                if (
                    self._write_failed_at is not None
                    and now >= self._write_failed_at + settings.close_timeout
                ):
                    self.end("write failed: the socket refused our bytes")
                    return
                if now >= next_ping:
                    next_ping = now + interval
                    self._ping(None)
        finally:
            self._timer_sleep = self._timer_task = None
            self._stats.connection_tasks -= 1

    def _ping(self, on_pong: Callable[[], None] | None) -> bytes | None:
        # Unanswered pings are bounded by the WebSocket: a peer that never pongs but
        # keeps sending is alive, and must not make us hold one entry per interval.
        payload = next(self._ping_ids).to_bytes(4, "big")
        sent_at = trio.current_time()
        stats = self._stats
        telemetry = self._telemetry

        def pong() -> None:
            stats.ping_rtt = rtt = trio.current_time() - sent_at
            if telemetry is not None:  # the keepalive's pings and the caller's alike
                telemetry.ping_rtt(rtt)
            if on_pong is not None:
                on_pong()

        if not self.ws.send_ping(payload, pong):
            return None
        self._start_writer()
        return payload

    async def ping(self) -> float | None:
        """One ping; the RTT in seconds (also kept in stats), or None if the connection
        closed first. The caller bounds the wait."""
        if not self.is_open:
            return None
        answered = trio.Event()
        payload = self._ping(answered.set)
        if payload is None:
            return None
        with trio.CancelScope() as scope:
            self._cancel_on_end(scope)
            try:
                await answered.wait()
            finally:
                self._forget_on_end(scope)
                self.ws.forget_ping(payload)
        if scope.cancelled_caught:
            return None
        return self._stats.ping_rtt

    # --- the writer ------------------------------------------------------------------

    def _send_now(self, payload: bytes, frames: int) -> None:
        """Frame ``payload`` (``frames`` lines) as one message and hand the socket what
        it takes now, never waiting (``ws.can_send_now``); the rest is the writer's. A
        failed write is taken as any other (see `_write_failed`)."""
        ws = self.ws
        ws.send_text(payload)
        self._count_sent(frames)
        try:
            if not ws.write_now():
                self._start_writer()
        except WriteFailed as exc:
            self._write_failed(exc)

    def _start_writer(self) -> None:
        if not self._writer_running and self.is_open:
            self._writer_running = True
            self._nursery.start_soon(self._writer, name=WRITER_TASK)

    async def _writer(self) -> None:
        """Write what is queued, in as few messages and writes as the limits allow;
        end when nothing is left (the next frame that cannot go directly restarts it)."""
        outbox, ws, stats = self.outbox, self.ws, self._stats
        stats.tasks += 1  # (counted here: no wrapper coroutine per writer start)
        stats.connection_tasks += 1
        try:
            while True:
                # Another task's write (a request's direct write, the reader's answer
                # to a close) goes first. Frames stay in the outbox meanwhile, so a
                # stalled socket fills the outbox (max_queued_frames), not our memory,
                # and a frame whose sender gives up meanwhile never leaves.
                await ws.wait_write_done()
                # If other tasks are ready to run, one scheduler pass lets them add
                # their frames first, so a burst leaves in one write instead of many.
                if _current_statistics().tasks_runnable:
                    await trio.lowlevel.checkpoint()
                self.burst = False
                batch = outbox.take_unsent()
                sent: list[Outgoing] = []
                framed = 0
                for group in outbox.messages(batch):
                    if not ws.can_send:
                        break  # nothing of it can leave: leave it unmarked
                    for item in group:
                        item.mark_sending()
                    lines = [item.line for item in group]
                    payload = lines[0] if len(lines) == 1 else b"".join(lines)  # type: ignore[arg-type]
                    ws.send_text(payload)  # type: ignore[arg-type]
                    self._count_sent(len(group))
                    sent += group
                    framed += len(payload)
                    if framed >= FLUSH_BYTES:
                        # Write as we go: what is not framed yet has certainly not
                        # left (definite if the link dies now), and the senders of
                        # what is still queued may yet give up.
                        if not await self._flush(sent):
                            return
                        sent, framed = [], 0
                if ws.writing or ws.broken or not ws.has_pending:
                    # Nothing to write, or another task is writing (the reader's answer
                    # to a close): it writes what we framed.
                    for item in sent:
                        item.mark_written()
                    if not outbox.has_queued:
                        return
                    continue
                if not await self._flush(sent) or not outbox.has_queued:
                    # (Nothing queued meanwhile: done, without another pass of the loop
                    # to find that out; it would ask Trio's statistics once more.)
                    return
        finally:
            self._writer_running = False
            stats.tasks -= 1
            stats.connection_tasks -= 1

    async def _flush(self, sent: list[Outgoing]) -> bool:
        try:
            await self.ws.flush()
        except WriteFailed as exc:
            self._write_failed(exc)
            return False
        for item in sent:
            item.mark_written()
        return True

    def _write_failed(self, exc: WriteFailed) -> None:
        # The reader usually sees the same failure once it has handed over everything
        # received before it (answers among them) and ends the connection then; the
        # timer ends it ``close_timeout`` later if it does not.
        logger.info(
            "relay write failed: %s",
            exc,
            extra={"cause": "write failed", "errno": getattr(exc.__cause__, "errno", None)},
        )
        if self._write_failed_at is None:
            self._write_failed_at = at = trio.current_time()
            sleep = self._timer_sleep
            if sleep is not None and at + self._settings.close_timeout < sleep.deadline:
                sleep.deadline = at + self._settings.close_timeout

    def _count_sent(self, frames: int) -> None:
        self._stats.messages_sent += 1
        self._stats.frames_sent += frames
