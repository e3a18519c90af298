"""Handing a delivery the pipeline gave up on to ``on_dead_letter`` (or the log)."""

from __future__ import annotations

import logging
from typing import Literal

from ..._core.delivery import DeadLetter, Delivery
from ..._core.handlers import DeadLetterHandler
from ..._core.stats import RelayStats
from ..._core.telemetry import Telemetry

__all__ = ["hand_off"]

logger = logging.getLogger("trio_relay")


async def hand_off(
    delivery: Delivery,
    reason: Literal["attempts_exhausted", "unparseable"],
    attempts: int,
    error: str,
    on_dead_letter: DeadLetterHandler | None,
    stats: RelayStats,
    telemetry: Telemetry | None = None,
) -> None:
    """Count, then pass the letter on; a raising ``on_dead_letter`` is logged, never
    propagated (the delivery is acked after this either way, or it would be replayed
    forever)."""
    stats.dead_letters += 1
    if telemetry is not None:
        telemetry.dead_letter()
    letter = DeadLetter(
        kind=delivery.kind,
        reason=reason,
        key=delivery.key,
        buffer_id=delivery.buffer_id,
        attempts=attempts,
        error=error,
        payload=delivery.payload if delivery.payload is not None else delivery.raw,
    )
    if on_dead_letter is None:
        logger.error("inbound: dead letter %r", letter, extra=_fields(letter))
        return
    try:
        await on_dead_letter(letter)
    except Exception:
        logger.exception("inbound: on_dead_letter raised for %r", letter, extra=_fields(letter))


def _fields(letter: DeadLetter) -> dict[str, object]:
    return {"buffer_id": letter.buffer_id, "cause": letter.reason}
