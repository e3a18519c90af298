"""``inbound_ack`` frames whose departure can be awaited.

An ack is fire-and-forget on the wire, but leaving the relay needs one thing from it:
the acks of handlers that finished during the drain must leave *before* the socket is
closed, or the connector replays deliveries that were handled. The outbox is FIFO, so
once the newest ack has been handed to the socket, all earlier ones have too.
"""

from __future__ import annotations

import trio

from .._core.codec import encode_frame
from .._core.frames import InboundAck

__all__ = ["TrackedAck"]


class TrackedAck:
    """An ``inbound_ack`` line for the outbox (its ``Outgoing`` protocol); ``written``
    is set once the message carrying it was handed to the socket."""

    __slots__ = ("line", "written")
    abandoned = False

    def __init__(self, buffer_id: str) -> None:
        self.line = encode_frame(InboundAck(buffer_id))
        self.written = trio.Event()

    def mark_sending(self) -> None:
        pass

    def mark_written(self) -> None:
        self.written.set()
