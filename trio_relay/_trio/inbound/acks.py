"""The one path an ``inbound_ack`` takes: `DeliveryKeys` (``keys.py``) decides a
delivery is done with and calls `AckSender.send_ack`; `RelayAcks`, the
implementation the relay runs with, queues a `TrackedAck` on the newest open
connection's outbox; the connection's writer hands it to the socket and marks it written.

An ack is fire-and-forget on the wire, but leaving the relay needs one thing from it:
the acks of handlers that finished during the drain must leave *before* the socket is
closed, or the connector replays deliveries that were handled. The outbox is FIFO, so
once the newest ack has been handed to the socket, all earlier ones have too. And the
pipeline keeps a handled key pinned in its dedupe window until its ack is written: an
ack still queued when its connection dies is lost, and the replay must be recognised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from ..._core.protocol import ack_line
from ..._core.stats import RelayStats

__all__ = ["AckLink", "AckSender", "RelayAcks", "TrackedAck"]


class AckSender(Protocol):
    """Where the inbound pipeline sends its acks."""

    def send_ack(self, buffer_id: str, on_written: Callable[[], None]) -> bool:
        """Queue an ``inbound_ack`` for ``buffer_id`` without blocking; false when there
        is no connection to queue it on. ``on_written()`` is called once the ack has
        been handed to the socket."""
        ...


class TrackedAck:
    """An ``inbound_ack`` line for the outbox (its ``Outgoing`` protocol); ``written``
    is set once the message carrying it was handed to the socket."""

    __slots__ = ("_on_written", "line", "written")
    abandoned = False

    def __init__(self, buffer_id: str, on_written: Callable[[], None]) -> None:
        self.line = ack_line(buffer_id)  # wire bytes, encoded once
        self.written = trio.Event()
        self._on_written = on_written

    def mark_sending(self) -> None:
        pass

    def mark_written(self) -> None:
        self.written.set()
        self._on_written()  # the pipeline unpins the delivery's dedupe key


class _AckQueue(Protocol):
    def put(self, item: TrackedAck) -> bool: ...


class AckLink(Protocol):
    """A connection as the acks see it (`Connection` is one)."""

    @property
    def is_open(self) -> bool: ...

    @property
    def outbox(self) -> _AckQueue: ...


class RelayAcks:
    """The relay's `AckSender`: acks go on `link`, the newest open
    connection, handshake done or not (the connector replays buffered deliveries right
    after its descriptor, before the relay counts itself connected). The relay sets and
    clears `link` as connections open and end."""

    __slots__ = ("_stats", "last", "link")  # no __dict__: one per relay

    def __init__(self, stats: RelayStats) -> None:
        self._stats = stats
        self.link: AckLink | None = None
        self.last: TrackedAck | None = None
        """The newest ack queued: once it is written, every earlier one is."""

    def send_ack(self, buffer_id: str, on_written: Callable[[], None]) -> bool:
        link = self.link
        ack = TrackedAck(buffer_id, on_written)
        if link is None or not (link.is_open and link.outbox.put(ack)):
            return False
        self.last = ack
        self._stats.acks_sent += 1
        return True
