"""Interrupts (``interrupt_inbound``): a user asked to stop a running turn.

They never queue behind messages: each starts at once in its own task, under a limit of
``max_concurrent_handlers`` of its own, so a stop request reaches its turn even when
every message slot is taken. At most ``max_inbound_queue`` may be pending; past that
each one is counted in ``stats.inbound_dropped`` and logged at error. Never acked and
never deduped (the connector sends them live, at most once).
"""

from __future__ import annotations

import logging

import trio

from ..._core.frames import InterruptInbound
from ..._core.handlers import InterruptHandler
from ..._core.settings import InboundSettings
from ..._core.stats import RelayStats

__all__ = ["InterruptRunner"]

logger = logging.getLogger("trio_relay")


class InterruptRunner:
    """Starts ``on_interrupt(session_key, chat_id)`` for each submitted interrupt."""

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = ("_cap", "_concurrency", "_handler", "_nursery", "_pending", "_slots", "_stats")

    def __init__(
        self, handler: InterruptHandler | None, stats: RelayStats, settings: InboundSettings
    ) -> None:
        self._handler = handler
        self._stats = stats
        self._cap = settings.max_inbound_queue
        self._concurrency = settings.max_concurrent_handlers
        self._pending = 0
        self._nursery: trio.Nursery | None = None

    _slots: trio.Semaphore
    """Made by `start`: a relay that never runs the pipeline needs none."""

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._slots = trio.Semaphore(self._concurrency)

    def submit(self, frame: InterruptInbound) -> None:
        """Start the handler for ``frame`` (after `start`). Never blocks."""
        assert self._nursery is not None
        if self._pending >= self._cap:
            self._stats.inbound_dropped += 1
            logger.error(
                "inbound: %d interrupts pending; LOST interrupt for session %s",
                self._pending,
                frame.session_key,
            )
            return
        self._pending += 1
        self._nursery.start_soon(self._run, frame)

    async def _run(self, frame: InterruptInbound) -> None:
        try:
            if self._handler is None:
                logger.debug("inbound: interrupt for %s ignored: no handler", frame.session_key)
                return
            async with self._slots:
                try:
                    await self._handler(frame.session_key, frame.chat_id)
                except Exception:
                    self._stats.handler_failures += 1
                    logger.warning(
                        "inbound: interrupt handler failed for session %s",
                        frame.session_key,
                        exc_info=True,
                    )
        finally:
            self._pending -= 1
