"""The pipeline's queue bound, with its logging and counting (rules in ``_core/backlog``).

An overload is announced once at warning when it starts and once at info when it ends;
a refused buffered delivery is counted in ``stats.inbound_dropped`` (the connector
redelivers it) and a lost live one is counted and logged at error. ``stats.queue_depth``
follows the number waiting.
"""

from __future__ import annotations

import logging

from ..._core.backlog import Backlog, Room
from ..._core.stats import RelayStats

__all__ = ["QueueGate"]

logger = logging.getLogger("trio_relay")


class QueueGate:
    __slots__ = ("_backlog", "_stats")  # no __dict__: one per relay

    def __init__(self, bound: int, stats: RelayStats) -> None:
        self._backlog = Backlog(bound)
        self._stats = stats

    def has_room(self, buffered: bool, label: str) -> bool:
        """Whether one more may wait (``label`` names it in logs: ids only)."""
        backlog = self._backlog
        room, started = backlog.room(buffered)
        if started:
            logger.warning(
                "inbound: %d deliveries waiting for a handler (bound %d); buffered ones "
                "are left to the connector to redeliver, live ones queue up to %d",
                backlog.waiting, backlog.bound, backlog.hard_cap,
            )
        if room is Room.REFUSED:
            self._stats.inbound_dropped += 1
            logger.debug("inbound: queue full, dropped %s without ack", label)
        elif room is Room.LOST:
            self._stats.inbound_dropped += 1
            logger.error("inbound: queue at hard cap, LOST live %s", label)
        return room is Room.YES

    def change(self, delta: int) -> None:
        """``delta`` more (or fewer) waiting."""
        backlog = self._backlog
        if delta > 0:
            backlog.add(delta)
        elif backlog.remove(-delta):
            logger.info("inbound: backlog down to %d; overload over", backlog.waiting)
        self._stats.queue_depth = backlog.waiting
