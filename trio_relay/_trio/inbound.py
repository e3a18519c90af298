"""The inbound pipeline: user handlers run here, once per message, never on the reader.

The reader hands every ``inbound``, ``passthrough_forward`` and ``interrupt_inbound``
frame to :meth:`InboundPipeline.submit`, which never blocks and never awaits user code:
it decodes, dedupes and enqueues, and returns. Handlers run in the pipeline's own
nursery, so a handler that sends a request and awaits the reply cannot deadlock the
relay: the reply arrives through the reader, which is never waiting on a handler.

Rules, and why:

- **Ordering.** Messages of one chat (``platform:chat_id``) form a lane and are handled
  one at a time in arrival order; lanes run in parallel, at most
  ``config.max_concurrent_handlers`` handlers at once (a FIFO semaphore, so a busy chat
  cannot starve a quiet one). Passthrough forwards carry no chat id (the body is the
  platform's raw webhook), so each runs in a lane of its own: no ordering among them.
- **Interrupts** never queue behind messages: each starts at once in its own task, under
  a separate limit of ``max_concurrent_handlers``, so a stop request reaches its turn
  even when every message slot is taken.
- **Dedupe** (:class:`~trio_relay._core.dedupe.DedupeSet`) is decided at submit: a copy of a
  delivery that is queued or running is dropped without ack (the one in flight acks);
  a copy of a handled one is dropped and acked at once. Deciding at submit rather than
  when the lane reaches it keeps a replay storm (every re-handshake replays everything
  unacked) from filling the queue with duplicates. The key is claimed until the handler
  returns (commit, then ack) or raises (release, no ack, so the connector's redelivery is
  handled). Committed keys are also written to ``config.dedupe_path`` when set (see
  ``_dedupe_writer.py``), so replays after a restart are dropped too.
- **Giving up.** A delivery whose handler has failed ``config.max_delivery_attempts``
  times (counted per dedupe key, else per buffer id) is committed, handed to
  ``on_dead_letter`` and acked, instead of being replayed forever. So is a delivery
  whose payload cannot be decoded at all.
- **Pre-handler steps** (:meth:`InboundPipeline.add_pre_handler`): async steps that
  run on each decoded message, in its lane and slot, right before ``on_message``; see
  :data:`PreHandler`.
- **Overload.** At most ``config.max_inbound_queue`` deliveries wait for a slot. Beyond
  that, buffered deliveries (with a ``bufferId``) are dropped *without ack*: the
  connector still holds them and redelivers on the next handshake. Live deliveries (no
  ``bufferId``) exist nowhere else, so they still queue, with a warning, up to
  ``LIVE_OVERFLOW_FACTOR`` times the bound; past that hard cap they are lost, each one
  counted in ``stats.inbound_dropped`` and logged at error.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from .._core.config import RelayConfig
from .._core.dedupe import AttemptCounter, Claim, DedupeSet
from .._core.event import MessageEvent, normalize_platform
from .._core.frames import InboundFrame, InterruptInbound, PassthroughFrame
from .._core.passthrough import PassthroughForward
from .._core.stats import RelayStats
from .dedupe_writer import DedupeWriter

__all__ = ["DeadLetter", "InboundPipeline", "LIVE_OVERFLOW_FACTOR", "PreHandler"]

logger = logging.getLogger("trio_relay")

LIVE_OVERFLOW_FACTOR = 2
"""Live deliveries may queue up to this many times ``max_inbound_queue`` (see module
docstring, "Overload")."""

InboundItem = InboundFrame | PassthroughFrame | InterruptInbound
MessageHandler = Callable[[MessageEvent], Awaitable[None]]
InterruptHandler = Callable[[str, str], Awaitable[None]]
PassthroughHandler = Callable[[PassthroughForward], Awaitable[None]]
PreHandler = Callable[[MessageEvent], Awaitable[MessageEvent | None]]
"""An async step run on each message before ``on_message`` (the relay's own planes plug
in here: media downloaded on receipt, routes recorded, prompt presses consumed).

It runs in the message's lane and handler slot, so per-chat order holds and it counts
against ``max_concurrent_handlers``; it runs even when no ``on_message`` is set. It
returns the event to hand on (the same one, or a replacement such as
``dataclasses.replace(event, ...)``), or ``None`` to *consume* it: the delivery is then
handled (committed and acked) without reaching later steps or ``on_message``. A step
that raises fails the delivery exactly as a raising handler does (not acked, retried
up to ``max_delivery_attempts``). Steps run in the order they were added.
"""


@dataclass(frozen=True)
class DeadLetter:
    """A delivery the pipeline gave up on; it has been (or is about to be) acked.

    ``reason`` is ``"attempts_exhausted"`` (the handler raised ``attempts`` times) or
    ``"unparseable"`` (the payload could not be decoded; ``attempts`` is 0 and
    ``payload`` is the raw wire object). ``error`` is the ``repr`` of the last
    exception. ``payload`` is left out of ``repr``: a forwarded webhook's headers can
    carry platform signatures, and dead letters are made to be logged.
    """

    kind: Literal["message", "passthrough"]
    reason: Literal["attempts_exhausted", "unparseable"]
    key: str | None
    buffer_id: str | None
    attempts: int
    error: str
    payload: MessageEvent | PassthroughForward | dict[str, Any] = field(repr=False)


DeadLetterHandler = Callable[[DeadLetter], Awaitable[None]]


def _key_part(value: str) -> str:
    # Same escaping as MessageEvent.dedupe_key: a passthrough key has exactly one
    # unescaped ':' and a message key two, so the two kinds never collide.
    return value.replace("%", "%25").replace(":", "%3A")


@dataclass(eq=False)
class _Delivery:
    """One accepted ``inbound`` or ``passthrough_forward``, waiting in its lane."""

    kind: Literal["message", "passthrough"]
    payload: MessageEvent | PassthroughForward | None  # None: could not be decoded
    raw: dict[str, Any]
    buffer_id: str | None
    key: str | None  # the claimed dedupe key; None = fail open (no dedupe)
    decode_error: str | None = None

    @property
    def attempt_key(self) -> str | None:
        if self.key is not None:
            return self.key
        return None if self.buffer_id is None else f"buffer:{_key_part(self.buffer_id)}"

    @property
    def label(self) -> str:
        # For logs: ids only, never the text or a webhook's headers.
        return f"{self.kind} key={self.key} bufferId={self.buffer_id}"


class InboundPipeline:
    """Runs the relay's inbound handlers (see the module docstring for the rules).

    ``send_ack(buffer_id)`` queues an ``inbound_ack`` on the current connection and
    returns false if there is none; it must not block. An ack lost that way is
    harmless: the connector replays the delivery and dedupe drops and acks it.
    """

    def __init__(
        self,
        *,
        config: RelayConfig,
        stats: RelayStats,
        on_message: MessageHandler | None,
        on_interrupt: InterruptHandler | None,
        on_passthrough: PassthroughHandler | None,
        on_dead_letter: DeadLetterHandler | None,
        send_ack: Callable[[str], bool],
    ) -> None:
        self._config = config
        self._stats = stats
        self._on_message = on_message
        self._on_interrupt = on_interrupt
        self._on_passthrough = on_passthrough
        self._on_dead_letter = on_dead_letter
        self._send_ack = send_ack
        self._pre_handlers: list[PreHandler] = []
        self._dedupe = DedupeSet(config.dedupe_size)
        self._attempts = AttemptCounter(config.dedupe_size)
        self._slots = trio.Semaphore(config.max_concurrent_handlers)
        self._interrupt_slots = trio.Semaphore(config.max_concurrent_handlers)
        self._lanes: dict[Hashable, deque[_Delivery]] = {}
        self._waiting = 0  # deliveries accepted, not yet started (incl. early ones)
        self._interrupts_pending = 0
        self._overloaded = False
        self._warned_unhandled: set[str] = set()
        # Frames submitted before run() has loaded the durable store: dedupe decisions
        # must wait for it, or a replay of a handled message would look new.
        self._early: list[InboundItem] | None = []
        self._nursery: trio.Nursery | None = None
        self._writer: DedupeWriter | None = None

    def add_pre_handler(self, step: PreHandler) -> None:
        """Run ``step`` on every message before ``on_message`` (see :data:`PreHandler`)."""
        self._pre_handlers.append(step)

    # --- the reader's side (synchronous, never blocks) -------------------------------

    def submit(self, frame: InboundItem) -> None:
        """Accept one inbound frame from the reader. Never blocks, never runs a
        handler, never raises for the frame's content (bad content is logged and
        counted)."""
        try:
            if self._early is not None:
                self._submit_early(frame)
            elif isinstance(frame, InterruptInbound):
                self._start_interrupt(frame)
            else:
                self._admit(frame)
        except Exception:  # a bug of ours must not kill the reader
            self._stats.frames_rejected += 1
            logger.exception("inbound pipeline: could not accept %s frame", frame.TYPE)

    def _submit_early(self, frame: InboundItem) -> None:
        assert self._early is not None
        if not isinstance(frame, InterruptInbound):
            if not self._has_room(frame.buffer_id is not None, frame.TYPE):
                return
            self._set_waiting(self._waiting + 1)
        self._early.append(frame)

    def _admit(self, frame: InboundFrame | PassthroughFrame) -> None:
        delivery = self._decode(frame)
        if delivery.key is not None:
            claim = self._dedupe.claim(delivery.key)
            if claim is not Claim.NEW:
                self._stats.replays_dropped += 1
                if claim is Claim.DONE:
                    logger.debug("inbound: dropped replay of handled %s", delivery.label)
                    self._ack(delivery.buffer_id)
                else:  # in progress: the copy in flight will ack
                    logger.debug("inbound: dropped copy of in-flight %s", delivery.label)
                return
        if not self._has_room(delivery.buffer_id is not None, delivery.label):
            if delivery.key is not None:
                self._dedupe.release(delivery.key)
            return
        if delivery.kind == "message" and isinstance(delivery.payload, MessageEvent):
            source = delivery.payload.source
            lane: Hashable = (normalize_platform(source.platform), source.chat_id)
        else:
            lane = object()  # a lane of its own
        self._enqueue(lane, delivery)

    def _decode(self, frame: InboundFrame | PassthroughFrame) -> _Delivery:
        payload: MessageEvent | PassthroughForward
        if isinstance(frame, InboundFrame):
            try:
                payload = MessageEvent.from_wire(frame.event)
            except Exception as exc:  # FrameError, or a decoder bug: same fate
                return self._undecodable("message", frame.event, frame.buffer_id, exc)
            return _Delivery("message", payload, frame.event, frame.buffer_id, payload.dedupe_key)
        try:
            payload = PassthroughForward.from_wire(frame.forward)
        except Exception as exc:
            return self._undecodable("passthrough", frame.forward, frame.buffer_id, exc)
        # A forward has no message id; its buffer id is the only identity it has.
        key = None if frame.buffer_id is None else f"passthrough:{_key_part(frame.buffer_id)}"
        return _Delivery("passthrough", payload, frame.forward, frame.buffer_id, key)

    def _undecodable(
        self,
        kind: Literal["message", "passthrough"],
        raw: dict[str, Any],
        buffer_id: str | None,
        exc: Exception,
    ) -> _Delivery:
        self._stats.frames_rejected += 1
        logger.warning("inbound: cannot decode %s (bufferId=%s): %r", kind, buffer_id, exc)
        return _Delivery(kind, None, raw, buffer_id, None, decode_error=repr(exc))

    def _has_room(self, buffered: bool, label: str) -> bool:
        bound = self._config.max_inbound_queue
        if self._waiting < bound:
            return True
        if not self._overloaded:
            self._overloaded = True
            logger.warning(
                "inbound: %d deliveries waiting for a handler (bound %d); buffered ones "
                "are left to the connector to redeliver, live ones queue up to %d",
                self._waiting,
                bound,
                bound * LIVE_OVERFLOW_FACTOR,
            )
        if buffered:
            self._stats.inbound_dropped += 1
            logger.debug("inbound: queue full, dropped %s without ack", label)
            return False
        if self._waiting < bound * LIVE_OVERFLOW_FACTOR:
            return True
        self._stats.inbound_dropped += 1
        logger.error("inbound: queue at hard cap, LOST live %s", label)
        return False

    def _set_waiting(self, n: int) -> None:
        self._waiting = n
        self._stats.queue_depth = n
        # Hysteresis: announce the end of an overload once the backlog has halved.
        if self._overloaded and n <= self._config.max_inbound_queue // 2:
            self._overloaded = False
            logger.info("inbound: backlog down to %d; overload over", n)

    def _enqueue(self, lane_key: Hashable, delivery: _Delivery) -> None:
        assert self._nursery is not None
        self._set_waiting(self._waiting + 1)
        lane = self._lanes.get(lane_key)
        if lane is None:
            self._lanes[lane_key] = lane = deque([delivery])
            self._nursery.start_soon(self._drain_lane, lane_key, lane)
        else:
            lane.append(delivery)

    def _ack(self, buffer_id: str | None) -> None:
        if buffer_id is None:
            return
        try:
            sent = self._send_ack(buffer_id)
        except Exception:
            logger.exception("inbound: send_ack raised for bufferId=%s", buffer_id)
            return
        if not sent:
            # Not lost: the connector replays it, and dedupe drops and acks it then.
            logger.debug("inbound: no connection to ack bufferId=%s", buffer_id)

    # --- the pipeline's tasks ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run for the relay's whole life; returns only by cancellation.

        Loads the durable dedupe store (if configured) before anything is handled;
        ``await nursery.start(pipeline.run)`` returns once it has. Frames submitted
        before that are kept (within the queue bound) and admitted right after.
        """
        if self._config.dedupe_path is not None:
            # Fail open if unusable: handling messages without restart-proof dedupe
            # beats not handling them at all (logged at error).
            opened = await DedupeWriter.open(self._config.dedupe_path, self._config.dedupe_size)
            if opened is not None:
                self._writer, keys = opened
                self._dedupe.load(keys)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self._writer is not None:
                nursery.start_soon(self._writer.run)
            early, self._early = self._early or [], None
            self._set_waiting(
                self._waiting - sum(not isinstance(f, InterruptInbound) for f in early)
            )
            for frame in early:
                self.submit(frame)
            task_status.started()
            await trio.sleep_forever()

    async def _drain_lane(self, lane_key: Hashable, lane: deque[_Delivery]) -> None:
        # One task per active lane: handles its deliveries one by one, in order, then
        # removes the lane. The check and the removal have no checkpoint between them,
        # so submit() never appends to a lane whose task has already finished.
        while lane:
            async with self._slots:
                delivery = lane.popleft()
                self._set_waiting(self._waiting - 1)
                await self._handle(delivery)
        del self._lanes[lane_key]

    async def _handle(self, delivery: _Delivery) -> None:
        if delivery.payload is None:
            await self._dead_letter(delivery, "unparseable", 0, delivery.decode_error or "")
            return
        try:
            await self._call_handler(delivery.payload)
        except Exception as exc:
            await self._failed(delivery, exc)
        except BaseException:
            # Cancelled (the relay is closing) or KeyboardInterrupt: not handled, so a
            # redelivery must run it. Never swallowed.
            if delivery.key is not None:
                self._dedupe.release(delivery.key)
            raise
        else:
            self._stats.delivered += 1
            self._finish(delivery)

    async def _call_handler(self, payload: MessageEvent | PassthroughForward) -> None:
        if isinstance(payload, MessageEvent):
            for step in self._pre_handlers:
                stepped = await step(payload)
                if stepped is None:
                    return  # consumed by a step: handled, acked
                payload = stepped
            handler: Callable[[Any], Awaitable[None]] | None = self._on_message
            kind = "message"
        else:
            handler, kind = self._on_passthrough, "passthrough"
        if handler is None:
            # Acked all the same: the application chose not to take these, and leaving
            # them unacked would make the connector replay them forever.
            if kind not in self._warned_unhandled:
                self._warned_unhandled.add(kind)
                logger.warning("inbound: %s received but no handler is set; discarding", kind)
            return
        await handler(payload)

    def _finish(self, delivery: _Delivery) -> None:
        """Commit (durably, if configured), forget failures, then ack."""
        if delivery.key is not None:
            self._dedupe.commit(delivery.key)
            if self._writer is not None:
                self._writer.add(delivery.key)
        if (attempt_key := delivery.attempt_key) is not None:
            self._attempts.forget(attempt_key)
        self._ack(delivery.buffer_id)

    async def _failed(self, delivery: _Delivery, exc: Exception) -> None:
        self._stats.handler_failures += 1
        attempt_key = delivery.attempt_key
        attempts = 1 if attempt_key is None else self._attempts.record_failure(attempt_key)
        limit = self._config.max_delivery_attempts
        if attempts >= limit:
            logger.error(
                "inbound: handler failed %s (attempt %d of %d); giving up",
                delivery.label,
                attempts,
                limit,
                exc_info=exc,
            )
            await self._dead_letter(delivery, "attempts_exhausted", attempts, repr(exc))
            return
        if delivery.key is not None:
            self._dedupe.release(delivery.key)  # so the redelivery is handled
        if delivery.buffer_id is not None:
            logger.warning(
                "inbound: handler failed %s (attempt %d of %d); not acked, "
                "the connector will redeliver it",
                delivery.label,
                attempts,
                limit,
                exc_info=exc,
            )
        else:
            logger.error(
                "inbound: handler failed live %s (attempt %d of %d); the "
                "connector does not redeliver live events",
                delivery.label,
                attempts,
                limit,
                exc_info=exc,
            )

    async def _dead_letter(
        self,
        delivery: _Delivery,
        reason: Literal["attempts_exhausted", "unparseable"],
        attempts: int,
        error: str,
    ) -> None:
        self._stats.dead_letters += 1
        letter = DeadLetter(
            kind=delivery.kind,
            reason=reason,
            key=delivery.key,
            buffer_id=delivery.buffer_id,
            attempts=attempts,
            error=error,
            payload=delivery.payload if delivery.payload is not None else delivery.raw,
        )
        if self._on_dead_letter is None:
            logger.error("inbound: dead letter %r", letter)
        else:
            try:
                await self._on_dead_letter(letter)
            except Exception:
                logger.exception("inbound: on_dead_letter raised for %r", letter)
        # Handed off (or logged): replays of it are now dropped and acked.
        self._finish(delivery)

    def _start_interrupt(self, frame: InterruptInbound) -> None:
        assert self._nursery is not None
        if self._interrupts_pending >= self._config.max_inbound_queue:
            self._stats.inbound_dropped += 1
            logger.error(
                "inbound: %d interrupts pending; LOST interrupt for session %s",
                self._interrupts_pending,
                frame.session_key,
            )
            return
        self._interrupts_pending += 1
        self._nursery.start_soon(self._run_interrupt, frame)

    async def _run_interrupt(self, frame: InterruptInbound) -> None:
        try:
            if self._on_interrupt is None:
                logger.debug("inbound: interrupt for %s ignored: no handler", frame.session_key)
                return
            async with self._interrupt_slots:
                try:
                    await self._on_interrupt(frame.session_key, frame.chat_id)
                except Exception:
                    self._stats.handler_failures += 1
                    logger.warning(
                        "inbound: interrupt handler failed for session %s",
                        frame.session_key,
                        exc_info=True,
                    )
        finally:
            self._interrupts_pending -= 1
