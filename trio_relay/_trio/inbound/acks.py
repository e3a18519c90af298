"""``inbound_ack`` frames whose departure can be awaited.

An ack is fire-and-forget on the wire, but leaving the relay needs one thing from it:
the acks of handlers that finished during the drain must leave *before* the socket is
closed, or the connector replays deliveries that were handled. The outbox is FIFO, so
once the newest ack has been handed to the socket, all earlier ones have too. And the
pipeline keeps a handled key pinned in its dedupe window until its ack is written: an
ack still queued when its connection dies is lost, and the replay must be recognised.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..._core.codec import encode_wire
from ..._core.frames import InboundAck

__all__ = ["TrackedAck"]


class TrackedAck:
    """An ``inbound_ack`` line for the outbox (its ``Outgoing`` protocol); ``written``
    is set once the message carrying it was handed to the socket."""

    __slots__ = ("_on_written", "line", "written")
    abandoned = False

    def __init__(self, buffer_id: str, on_written: Callable[[], None]) -> None:
        self.line = encode_wire(InboundAck(buffer_id).to_wire())  # wire bytes, encoded once
        self.written = trio.Event()
        self._on_written = on_written

    def mark_sending(self) -> None:
        pass

    def mark_written(self) -> None:
        self.written.set()
        self._on_written()  # the pipeline unpins the delivery's dedupe key
