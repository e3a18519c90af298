"""The inbound pipeline: user handlers run here, once per message, never on the reader.

The reader hands every ``inbound``, ``passthrough_forward`` and ``interrupt_inbound``
frame to `InboundPipeline.submit`, which never blocks and never awaits user code:
it decodes, dedupes and enqueues, and returns. Handlers run in the pipeline's own
nursery, so a handler that awaits a reply cannot deadlock the relay: the reply arrives
through the reader, which never waits on a handler. The pure rules live in ``_core/``
(``delivery``, ``backlog``, ``dedupe``, ``dedupe_store``, ``handlers``); one run of the
user's code is ``handler_call.py``; the bookkeeping of keys and acks is
``keys.py``; what a failed or cancelled handler leads to is ``failures.py``
(a `Failures` the pipeline holds). The rules, and why:

- **Ordering.** Messages of one chat (``platform:chat_id``) form a lane, handled one
  at a time in arrival order; lanes run in parallel, at most
  ``max_concurrent_handlers`` at once (a FIFO semaphore: a busy chat cannot starve a
  quiet one). Each passthrough forward is a lane of its own. Interrupts never queue
  behind messages (``interrupts.py``).
- **Stop means stop** (``turns.py``): with ``interrupt_cancels_turn``, an interrupt
  cancels the handler running for its chat at once, from ``submit``; the stopped
  delivery is handled (committed and acked, counted in ``turns_interrupted``), never
  retried, even when the handler raised while it unwound.
- **Dedupe** is decided twice. At submit, by the local ``DedupeSet``: a copy of a
  delivery queued or running here is dropped without ack (the one in flight acks); a
  copy of a handled one is dropped and acked, so a replay storm cannot fill the queue
  with duplicates. Right before the handler, by the store (``config.dedupe_store``),
  which knows what other replicas and earlier runs handled. A key is committed when
  the handler returns (then acked), released when it raises or is cancelled.
- **The window** covers everything the pipeline can hold (queued plus running) and
  every handled key whose ack has not been handed to a socket yet (pinned until it is:
  an ack queued on a connection that dies is lost, and the replay must still be caught).
- **Failures** are retried in this session after a short backoff
  (``delivery.after_failure``; ``MessageEvent.attempt`` says which run it is); a replay
  meanwhile is a copy in flight. After ``max_delivery_attempts`` failures, or if the
  payload cannot be decoded, the delivery goes to ``on_dead_letter`` and is acked.
- **Any handler, any exception.** A handler raising a ``trio.Cancelled`` of a scope
  outside the pipeline is a handler failure: only the pipeline's own cancellation
  ends it, never a handler, quietly.
- **Closing.** `InboundPipeline.drain` starts nothing new and waits for running
  handlers (the relay bounds it by ``drain_timeout``); each one cancelled after that is
  logged with its ids, and not acked, so it is redelivered.
- **Overload** (``backlog.py``): buffered deliveries past ``max_inbound_queue`` are left
  to the connector; live ones queue up to twice that.
- **Intercepts** (`InboundPipeline.add_intercept`): synchronous checks at submit,
  before the lanes, that may consume a new message (acked and committed at once): a
  prompt press arrives in the asking handler's own chat, so in the lane it would wait
  behind the very handler that awaits it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable
from contextlib import AsyncExitStack
from contextlib import nullcontext as _no_shield

import trio

from ..._core.backlog import LIVE_OVERFLOW_FACTOR
from ..._core.dedupe import DedupeSet, dedupe_window
from ..._core.dedupe_store import MemoryDedupeStore
from ..._core.delivery import DeadLetter, Delivery, decode_delivery
from ..._core.event import MessageEvent, rejected_trust_fields
from ..._core.frames import InboundFrame, InterruptInbound, PassthroughFrame
from ..._core.handlers import (
    DeadLetterHandler,
    InterruptHandler,
    MessageHandler,
    PassthroughHandler,
    PreHandler,
)
from ..._core.settings import InboundSettings
from ..._core.stats import RelayStats, counted_task
from ..._core.telemetry import Telemetry
from ..log_fields import RELAY_NAME
from ..stores.sqlite import SqliteDedupeStore
from .acks import AckSender
from .failures import Failures
from .handler_call import HandlerCall
from .interrupts import InterruptRunner
from .keys import DeliveryKeys
from .queue_gate import QueueGate
from .turns import RunningTurns

__all__ = ["LIVE_OVERFLOW_FACTOR", "DeadLetter", "DeadLetterHandler", "InboundPipeline",
           "Intercept", "InterruptHandler", "MessageHandler", "PassthroughHandler",
           "PreHandler"]

logger = logging.getLogger("trio_relay")

InboundItem = InboundFrame | PassthroughFrame | InterruptInbound
Intercept = Callable[[MessageEvent], bool]
"""A synchronous check at submit; true consumes the message. It must not block; one
that raises is logged and the message goes on."""


class InboundPipeline:
    """Runs the relay's inbound handlers (see the module docstring for the rules).

    ``acks`` (an `AckSender`) queues each ``inbound_ack`` on the current
    connection and returns false if there is none; it must not block, and it calls
    ``on_written()`` once the ack has been handed to the socket. Until then the key
    stays pinned in the dedupe window.
    ``namespace`` (the gateway id) keeps gateways sharing a store apart; ``name`` is
    the relay's in the records logged by the pipeline's tasks.
    """

    # No __dict__: one per relay, held for its whole life.
    __slots__ = (
        "_call_handler",
        "_drain_began",
        "_draining",
        "_early",
        "_failures",
        "_idle",
        "_intercepts",
        "_interrupts",
        "_keys",
        "_lanes",
        "_name",
        "_namespace",
        "_nursery",
        "_queue",
        "_running",
        "_settings",
        "_slots",
        "_start",
        "_stats",
        "_telemetry",
        "_turns",
        "_window",
    )

    def __init__(
        self,
        *,
        settings: InboundSettings,
        stats: RelayStats,
        on_message: MessageHandler | None,
        on_interrupt: InterruptHandler | None,
        on_passthrough: PassthroughHandler | None,
        on_dead_letter: DeadLetterHandler | None,
        acks: AckSender,
        namespace: str = "",
        name: str = "",
        telemetry: Telemetry | None = None,
    ) -> None:
        self._settings = settings
        self._stats = stats
        self._name = name
        self._telemetry = telemetry
        self._call_handler = HandlerCall(on_message, on_passthrough)
        self._namespace = namespace
        window = dedupe_window(
            settings.dedupe_size, settings.max_inbound_queue, settings.max_concurrent_handlers
        )
        self._window = window
        self._keys = DeliveryKeys(DedupeSet(window), stats, acks, telemetry)
        self._failures = Failures(settings, stats, self._keys, on_dead_letter, telemetry)
        self._interrupts = InterruptRunner(on_interrupt, stats, settings)
        cancels = settings.interrupt_cancels_turn
        if cancels is None:
            cancels = on_interrupt is None  # a handler of its own decides, unless told
        self._turns = RunningTurns() if cancels else None
        """The running turns an interrupt can stop; ``None`` when interrupts stop none."""
        self._lanes: dict[Hashable, deque[Delivery]] = {}
        self._queue = QueueGate(settings.max_inbound_queue, stats)
        self._running = 0
        # What only a pipeline that handles something needs is made when it does (an
        # idle relay keeps none of it): the handler slots by run(), the events by their
        # first waiter.
        self._idle: trio.Event | None = None
        """Set whenever no handler runs; made when the first one starts."""
        self._draining = False
        self._drain_began: trio.Event | None = None
        """Set by `drain`; made by the first retry that waits out its backoff."""
        # Frames submitted before run() has loaded the store: dedupe decisions must
        # wait for it, or a replay of a handled message would look new.
        self._early: list[InboundItem] | None = []
        self._nursery: trio.Nursery | None = None
        self._intercepts: list[Intercept] = []
        self._start: Callable[[], None] | None = None

    _slots: trio.Semaphore
    """At most ``max_concurrent_handlers`` handlers at once; made by `run`."""

    def start_on_first_frame(self, start: Callable[[], None]) -> None:
        """Have ``start()`` (which starts `run`) called when the first frame is
        submitted, not before: a relay that receives nothing runs no pipeline task.
        (For a store with nothing to load; a durable one is opened at once.)"""
        self._start = start

    def add_intercept(self, check: Intercept) -> None:
        """Offer every new message to ``check`` at submit (see "Intercepts" above)."""
        self._intercepts.append(check)

    def add_pre_handler(self, step: PreHandler) -> None:
        """Run ``step`` on every message before ``on_message``: it may replace the event
        or consume it (return ``None``); see ``_core/handlers.PreHandler``."""
        self._call_handler.pre_handlers.append(step)

    @property
    def window(self) -> int:
        """Handled keys remembered locally, pinned ones aside (see ``dedupe_window``)."""
        return self._window

    # --- the reader's side (synchronous, never blocks) -------------------------------

    def submit(self, frame: InboundItem) -> None:
        """Accept one inbound frame from the reader. Never blocks, never runs a
        handler, never raises for the frame's content (bad content is logged and
        counted)."""
        try:
            if self._draining:
                logger.debug("inbound: relay closing; %s left to the connector", frame.TYPE)
            elif self._early is not None:
                if self._start is not None:
                    start, self._start = self._start, None
                    start()
                if isinstance(frame, InterruptInbound):
                    self._early.append(frame)
                elif self._queue.has_room(frame.buffer_id is not None, frame.TYPE):
                    self._queue.change(+1)
                    self._early.append(frame)
            elif isinstance(frame, InterruptInbound):
                if self._turns is not None:
                    self._stop_turns(frame)
                self._interrupts.submit(frame)
            else:
                self._admit(decode_delivery(frame))
        except Exception:  # a bug of ours must not kill the reader
            self._stats.frames_rejected += 1
            logger.exception("inbound pipeline: could not accept %s frame", frame.TYPE)

    def _stop_turns(self, frame: InterruptInbound) -> None:
        assert self._turns is not None
        stopped = self._turns.interrupt(frame.chat_id)
        for delivery in stopped:
            logger.info("inbound: stopping the turn of %s: the user asked (session %s)",
                        delivery.label, frame.session_key,
                        extra={"buffer_id": delivery.buffer_id, "cause": "interrupted"})
        if not stopped:
            logger.debug("inbound: interrupt for chat %s (session %s): no turn running",
                         frame.chat_id, frame.session_key)

    def interrupted(self, chat_id: str) -> bool:
        """Whether a turn of ``chat_id`` running now was asked to stop."""
        return self._turns is not None and self._turns.interrupted(chat_id)

    def _admit(self, delivery: Delivery) -> None:
        if delivery.payload is None:
            self._stats.frames_rejected += 1
            logger.warning(
                "inbound: cannot decode %s (bufferId=%s): %s",
                delivery.kind, delivery.buffer_id, delivery.decode_error,
                extra={"buffer_id": delivery.buffer_id, "cause": delivery.decode_error},
            )
        elif isinstance(delivery.payload, MessageEvent):
            bad = rejected_trust_fields(delivery.payload.source.raw)
            if bad:  # bad input, not a bad message: it is delivered, the fields unknown
                self._stats.trust_fields_rejected += len(bad)
                logger.warning(
                    "inbound: %s: source %s not a JSON boolean; read as None (unknown)",
                    delivery.label, ", ".join(bad),
                )
        if not self._keys.claim(delivery):
            return
        if isinstance(delivery.payload, MessageEvent) and self._intercepted(delivery.payload):
            self._stats.delivered += 1
            if self._telemetry is not None:
                self._telemetry.delivered(delivery)
            self._keys.finish(delivery)
            return
        if not self._queue.has_room(delivery.buffer_id is not None, delivery.label):
            self._keys.unclaim(delivery)
            return
        assert self._nursery is not None
        self._queue.change(+1)
        lane_key: Hashable = delivery.lane if delivery.lane is not None else object()
        lane = self._lanes.get(lane_key)
        if lane is None:
            self._lanes[lane_key] = lane = deque([delivery])
            self._nursery.start_soon(self._drain_lane, lane_key, lane)
        else:
            lane.append(delivery)

    def _intercepted(self, event: MessageEvent) -> bool:
        for check in self._intercepts:
            try:
                if check(event):
                    return True
            except Exception:
                logger.exception("inbound: an intercept raised; the message goes on")
        return False

    # --- the pipeline's tasks ---------------------------------------------------------

    async def run(
        self,
        shield: trio.CancelScope | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run for the relay's whole life; returns only by cancellation.

        Opens the dedupe store and loads its recent keys before anything is handled;
        ``await nursery.start(pipeline.run)`` returns once it has. Frames submitted
        before that are kept (within the queue bound) and admitted right after.
        """
        with shield or _no_shield(), counted_task(self._stats):
            RELAY_NAME.set(self._name)  # in this task's records and its handlers'
            settings = self._settings
            self._slots = trio.Semaphore(settings.max_concurrent_handlers)
            store = settings.dedupe_store
            if store is None:
                store = (
                    MemoryDedupeStore() if settings.dedupe_path is None
                    else SqliteDedupeStore(settings.dedupe_path)
                )
            async with AsyncExitStack() as stack:
                await self._keys.attach(await stack.enter_async_context(
                    store.open(namespace=self._namespace, capacity=self._window, stats=self._stats)
                ))
                self._nursery = await stack.enter_async_context(trio.open_nursery())
                self._interrupts.start(self._nursery)
                early, self._early = self._early or [], None
                self._queue.change(-sum(not isinstance(f, InterruptInbound) for f in early))
                for frame in early:
                    self.submit(frame)
                task_status.started()
                await trio.sleep_forever()

    async def drain(self) -> None:
        """Start no new handler and return once none runs (the caller bounds the wait,
        with ``drain_timeout``). Deliveries not started are left to the connector:
        buffered ones are redelivered; live ones are lost, each logged at error."""
        self._draining = True
        if self._drain_began is not None:
            self._drain_began.set()
        for lane in self._lanes.values():
            while lane:
                self._abandon(lane.popleft(), "the relay is closing")
        while self._running and self._idle is not None:
            await self._idle.wait()

    def _abandon(self, delivery: Delivery, why: str, *, waiting: bool = True) -> None:
        if waiting:
            self._queue.change(-1)
        self._keys.release(delivery)
        if delivery.buffer_id is None:
            self._stats.inbound_dropped += 1
            logger.error("inbound: LOST live %s: %s", delivery.label, why, extra={"cause": why})
        else:
            logger.debug("inbound: %s left to the connector: %s", delivery.label, why,
                         extra={"buffer_id": delivery.buffer_id, "cause": why})

    async def _drain_lane(self, lane_key: Hashable, lane: deque[Delivery]) -> None:
        # One task per active lane: handles its deliveries one by one, in order, then
        # removes the lane. The check and the removal have no checkpoint between them,
        # so submit() never appends to a lane whose task has already finished.
        with counted_task(self._stats):
            while lane:
                async with self._slots:
                    if not lane:  # emptied by drain() while we waited for the slot
                        break
                    delivery = lane.popleft()
                    self._queue.change(-1)
                    retry = await self._attempt(delivery, first=True)
                while retry is not None:
                    # The slot is free during the backoff; the lane (the chat) waits.
                    with trio.move_on_after(retry):
                        try:
                            await self._wait_drain_began()
                        except BaseException:  # cancelled: not handled, never acked
                            self._keys.release(delivery)
                            raise
                    if self._draining:
                        self._keys.release(delivery)
                        logger.warning("inbound: retry of %s abandoned: relay closing; not "
                                       "acked", delivery.label,
                                       extra={"buffer_id": delivery.buffer_id,
                                              "cause": "relay closing"})
                        break
                    async with self._slots:
                        retry = await self._attempt(delivery, first=False)
            del self._lanes[lane_key]

    async def _wait_drain_began(self) -> None:
        if self._draining:
            await trio.lowlevel.checkpoint()
            return
        if self._drain_began is None:
            self._drain_began = trio.Event()
        await self._drain_began.wait()

    async def _attempt(self, delivery: Delivery, *, first: bool) -> float | None:
        """Run ``delivery`` once; returns the delay before a retry, or ``None`` when
        it is done with (handled, given up, or a copy another holder owns)."""
        if delivery.payload is None:
            error = delivery.decode_error or ""
            await self._failures.dead_letter(delivery, "unparseable", 0, error)
            return None
        if first and not await self._keys.store_allows(delivery):
            return None
        if self._draining:  # closing began while the store answered
            self._abandon(delivery, "the relay is closing", waiting=False)
            return None
        self._running += 1
        if self._running == 1:
            self._idle = trio.Event()
        telemetry = self._telemetry
        turns = self._turns
        # The turn's own scope, which an interrupt for its chat cancels; its Cancelled
        # ends at the scope, so only another scope's leaves the block below.
        turn = turns.begin(delivery) if turns is not None else None
        try:
            with turn or _no_shield():
                if telemetry is None:
                    await self._call_handler(delivery)
                else:  # the handler's span and duration
                    await telemetry.handle(self._call_handler, delivery)
        except trio.Cancelled as exc:
            if not await self._failures.cancelled_by_us(delivery):
                return await self._failures.failed(delivery, exc, foreign_cancel=True)
            raise
        except Exception as exc:
            if not delivery.interrupted:
                return await self._failures.failed(delivery, exc)
            # It raised while it unwound from the user's stop: retrying would run the
            # turn the user stopped. Logged; handled all the same.
            logger.warning("inbound: handler of %s raised while stopping; not retried",
                           delivery.label, exc_info=exc,
                           extra={"buffer_id": delivery.buffer_id, "cause": type(exc).__name__})
        except BaseException:
            self._keys.release(delivery)  # KeyboardInterrupt and such: never swallowed
            raise
        finally:
            if turn is not None:
                assert turns is not None
                turns.end(delivery)
            self._running -= 1
            if self._running == 0 and self._idle is not None:
                self._idle.set()
        if delivery.interrupted:
            self._stats.turns_interrupted += 1
        self._stats.delivered += 1
        if telemetry is not None:
            telemetry.delivered(delivery)
        self._keys.finish(delivery)
        return None
