"""How many inbound deliveries may wait for a handler, and what happens past the bound.

At most ``bound`` deliveries wait. Beyond that a *buffered* delivery (one with a
``bufferId``) is refused without ack: the connector still holds it and redelivers it on
the next handshake. A *live* one exists nowhere else, so it still queues, up to
``live_factor`` times the bound, and only past that hard cap is it lost. The overload
is announced once when it starts and once when it ends, with hysteresis (over once the
backlog has halved) so a backlog hovering at the bound does not flood the log.

Sans-I/O: the shell logs and counts what `Backlog.room` answers.
"""

from __future__ import annotations

import enum

__all__ = ["LIVE_OVERFLOW_FACTOR", "Backlog", "Room"]

LIVE_OVERFLOW_FACTOR = 2
"""Live deliveries may queue up to this many times the bound."""


class Room(enum.Enum):
    """The answer of `Backlog.room`."""

    YES = "yes"
    """Within the bound, or a live delivery within the hard cap."""
    REFUSED = "refused"
    """Buffered, past the bound: drop without ack (the connector redelivers)."""
    LOST = "lost"
    """Live, past the hard cap: lost (count it, log it at error)."""


class Backlog:
    """Deliveries accepted but not yet started."""

    def __init__(self, bound: int, live_factor: int = LIVE_OVERFLOW_FACTOR) -> None:
        if bound <= 0 or live_factor < 1:
            raise ValueError("Backlog bound must be positive and live_factor >= 1")
        self.bound = bound
        self.hard_cap = bound * live_factor
        self.waiting = 0
        self.overloaded = False

    def room(self, buffered: bool) -> tuple[Room, bool]:
        """Is there room for one more? Returns the answer and whether an overload
        started just now (announce it once)."""
        if self.waiting < self.bound:
            return Room.YES, False
        started = not self.overloaded
        self.overloaded = True
        if buffered:
            return Room.REFUSED, started
        return (Room.YES if self.waiting < self.hard_cap else Room.LOST), started

    def add(self, n: int = 1) -> None:
        self.waiting += n

    def remove(self, n: int = 1) -> bool:
        """``n`` fewer waiting; returns whether an overload ended just now."""
        self.waiting -= n
        if self.overloaded and self.waiting <= self.bound // 2:
            self.overloaded = False
            return True
        return False
