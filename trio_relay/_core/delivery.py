"""One inbound delivery as the pipeline sees it, and the decisions made about it.

Pure rules, tested without Trio: how a frame becomes a `Delivery` (its dedupe
key and its lane), what happens after a
handler failed (`after_failure`: retry in this session after a short backoff, or
give up), and the [`DeadLetter`][trio_relay.DeadLetter] record handed to ``on_dead_letter``.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

from .event import MessageEvent, escape_key_part, normalize_platform
from .frames import InboundFrame, PassthroughFrame
from .passthrough import PassthroughForward

__all__ = [
    "RETRY_FIRST_DELAY",
    "RETRY_MAX_DELAY",
    "DeadLetter",
    "Delivery",
    "GiveUp",
    "RetryIn",
    "after_failure",
    "decode_delivery",
]

RETRY_FIRST_DELAY = 0.5
"""Seconds before the first in-session retry of a failed handler; doubles per attempt."""
RETRY_MAX_DELAY = 10.0
"""The longest wait between two attempts of one delivery."""


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


@dataclass(eq=False)
class Delivery:
    """One accepted ``inbound`` or ``passthrough_forward``.

    ``key`` is its dedupe key (``None``: fail open, never deduped); ``lane`` the chat it
    is ordered within (``None``: a lane of its own); ``failures`` how often its handler
    has failed so far (the next run is attempt ``failures + 1``). Failures are counted
    on the delivery, not per key: a failed one is retried in place until it succeeds
    or is given up on, and any replay meanwhile is a copy in flight. ``interrupted`` is
    set when the user asked to stop its running handler (``interrupt_inbound``): it is
    then handled, never retried.
    """

    kind: Literal["message", "passthrough"]
    payload: MessageEvent | PassthroughForward | None  # None: could not be decoded
    raw: Any
    buffer_id: str | None
    key: str | None
    lane: Hashable | None
    decode_error: str | None = None
    failures: int = 0
    interrupted: bool = False

    @property
    def label(self) -> str:
        # For logs: ids only, never the text or a webhook's headers.
        return f"{self.kind} key={self.key} bufferId={self.buffer_id}"


def decode_delivery(frame: InboundFrame | PassthroughFrame) -> Delivery:
    """Decode a frame's payload; an undecodable one comes back with ``payload=None``
    and ``decode_error`` set (it is then dead-lettered, never replayed forever)."""
    if isinstance(frame, InboundFrame):
        try:
            event = MessageEvent.from_wire(frame.event)
        except Exception as exc:  # FrameError, or a decoder bug: same fate
            return Delivery("message", None, frame.event, frame.buffer_id, None, None, repr(exc))
        source = event.source
        lane = (normalize_platform(source.platform), source.chat_id)
        return Delivery("message", event, frame.event, frame.buffer_id, event.dedupe_key, lane)
    try:
        forward = PassthroughForward.from_wire(frame.forward)
    except Exception as exc:
        return Delivery("passthrough", None, frame.forward, frame.buffer_id, None, None, repr(exc))
    # A forward has no message id; its buffer id is the only identity it has. The
    # prefix has no unescaped ':' after it but one, so it never equals a message key.
    key = None if frame.buffer_id is None else f"passthrough:{escape_key_part(frame.buffer_id)}"
    return Delivery("passthrough", forward, frame.forward, frame.buffer_id, key, None)


@dataclass(frozen=True)
class RetryIn:
    """Run the handler again after ``delay`` seconds, in this session."""

    delay: float


@dataclass(frozen=True)
class GiveUp:
    """Attempts exhausted: dead-letter and ack."""


def after_failure(failures: int, limit: int) -> RetryIn | GiveUp:
    """What to do once a delivery's handler has failed ``failures`` times in all, when
    ``limit`` attempts are allowed: wait 0.5 s, 1 s, 2 s, … (at most 10 s) and retry, or
    give up at the limit. A short in-session retry beats waiting for the next handshake:
    a live delivery is never replayed, and a buffered one may not be for hours."""
    if failures >= limit:
        return GiveUp()
    return RetryIn(min(RETRY_FIRST_DELAY * 2 ** (failures - 1), RETRY_MAX_DELAY))
