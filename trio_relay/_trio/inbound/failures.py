"""What the inbound pipeline does when a handler fails, is cancelled, or its delivery
cannot be run at all (the rules are in ``pipeline.py``'s docstring; the retry schedule is
``_core/delivery.after_failure``).

One `Failures` is held by the `InboundPipeline` (composed,
not inherited), so that the pipeline's module reads as the happy path: admit, queue,
run, ack.
"""

from __future__ import annotations

import logging
from typing import Literal

import trio

from ..._core.delivery import Delivery, GiveUp, after_failure
from ..._core.event import MessageEvent
from ..._core.handlers import DeadLetterHandler
from ..._core.settings import InboundSettings
from ..._core.stats import RelayStats
from ..._core.telemetry import Telemetry
from .dead_letters import hand_off
from .keys import DeliveryKeys

__all__ = ["Failures"]

logger = logging.getLogger("trio_relay")


class Failures:
    """The pipeline's answers to a handler that failed or was cancelled, and to a
    delivery that goes to the dead letters."""

    __slots__ = ("_keys", "_max_attempts", "_on_dead_letter", "_stats", "_telemetry")

    def __init__(
        self,
        settings: InboundSettings,
        stats: RelayStats,
        keys: DeliveryKeys,
        on_dead_letter: DeadLetterHandler | None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._telemetry = telemetry
        self._max_attempts = settings.max_delivery_attempts
        self._stats = stats
        self._keys = keys
        self._on_dead_letter = on_dead_letter

    async def cancelled_by_us(self, delivery: Delivery) -> bool:
        # A Cancelled of the pipeline's own scope means the relay is closing: the
        # checkpoint below raises it again. If it returns, the handler raised a
        # Cancelled that belongs to some other scope: a failure of that handler.
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            self._keys.release(delivery)
            logger.warning("inbound: handler of %s cancelled: the relay is closing; not "
                           "acked, the connector will redeliver it", _ids(delivery),
                           extra={"buffer_id": delivery.buffer_id, "cause": "relay closing"})
            return True
        return False

    async def failed(
        self, delivery: Delivery, exc: BaseException, *, foreign_cancel: bool = False
    ) -> float | None:
        self._stats.handler_failures += 1
        delivery.failures += 1
        failures, limit = delivery.failures, self._max_attempts
        what = "raised a Cancelled of a scope it does not own" if foreign_cancel else "failed"
        decision = after_failure(failures, limit)
        if isinstance(decision, GiveUp):
            logger.error("inbound: handler %s for %s (attempt %d of %d); giving up", what,
                         delivery.label, failures, limit, exc_info=exc,
                         extra={"buffer_id": delivery.buffer_id, "cause": type(exc).__name__})
            await self.dead_letter(delivery, "attempts_exhausted", failures, repr(exc))
            return None
        logger.warning("inbound: handler %s for %s (attempt %d of %d); retrying in %g s",
                       what, delivery.label, failures, limit, decision.delay, exc_info=exc,
                       extra={"buffer_id": delivery.buffer_id, "cause": type(exc).__name__,
                              "next_attempt_s": decision.delay})
        return decision.delay

    async def dead_letter(
        self,
        delivery: Delivery,
        reason: Literal["attempts_exhausted", "unparseable"],
        attempts: int,
        error: str,
    ) -> None:
        await hand_off(
            delivery, reason, attempts, error, self._on_dead_letter, self._stats, self._telemetry
        )
        self._keys.finish(delivery)  # handed off (or logged): replays are dropped and acked


def _ids(delivery: Delivery) -> str:
    payload = delivery.payload
    message_id = payload.message_id if isinstance(payload, MessageEvent) else None
    return f"{delivery.label} message_id={message_id}"
