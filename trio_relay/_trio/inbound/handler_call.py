"""One run of the user's code for a delivery: the pre-handler steps, then the handler.

The message's ``attempt`` is set here (``MessageEvent.attempt``), so steps and the
handler see which run this is. A delivery whose kind has no handler is handled all the
same (acked): the application chose not to take these, and leaving them unacked would
make the connector replay them forever; that is warned about once per kind.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..._core.delivery import Delivery
from ..._core.event import MessageEvent
from ..._core.handlers import MessageHandler, PassthroughHandler, PreHandler

__all__ = ["HandlerCall"]

logger = logging.getLogger("trio_relay")


class HandlerCall:
    """Calls ``on_message`` (after the steps) or ``on_passthrough`` for a delivery."""

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = ("_on_message", "_on_passthrough", "_warned_unhandled", "pre_handlers")

    def __init__(
        self, on_message: MessageHandler | None, on_passthrough: PassthroughHandler | None
    ) -> None:
        self._on_message = on_message
        self._on_passthrough = on_passthrough
        self.pre_handlers: list[PreHandler] = []
        self._warned_unhandled: set[str] | None = None  # made by the first warning

    async def __call__(self, delivery: Delivery) -> None:
        payload = delivery.payload
        if isinstance(payload, MessageEvent):
            payload = dataclasses.replace(payload, attempt=delivery.failures + 1)
            for step in self.pre_handlers:
                stepped = await step(payload)
                if stepped is None:
                    return  # consumed by a step: handled, acked
                payload = stepped
            handler: Callable[[Any], Awaitable[None]] | None = self._on_message
        else:
            handler = self._on_passthrough
        if handler is None:
            warned = self._warned_unhandled
            if warned is None:
                warned = self._warned_unhandled = set()
            if delivery.kind not in warned:
                warned.add(delivery.kind)
                logger.warning(
                    "inbound: %s received but no handler is set; discarding", delivery.kind
                )
            return
        await handler(payload)
