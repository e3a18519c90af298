"""The reference connector's durable delivery buffer (``inbound`` with a ``bufferId``, in
docs/protocol.md, "Frames, connector to gateway").

Per gateway, the deliveries (``inbound`` and ``passthrough_forward`` frames carrying a
``bufferId``) that the gateway has not acknowledged yet, in the order they were
buffered. Every handshake replays them all; an ``inbound_ack`` removes one. That is the
whole at-least-once guarantee, so it lives on its own: plain Python, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from .._core.frames import Frame


class DurableBuffer:
    def __init__(self) -> None:
        self._pending: dict[str, dict[str, Frame]] = {}
        self._ids = itertools.count(1)

    def add(self, gateway_id: str, make: Callable[[str], Frame]) -> Frame:
        """Buffer the frame ``make(buffer_id)`` for ``gateway_id``; returns it."""
        buffer_id = f"buf-{next(self._ids)}"
        frame = make(buffer_id)
        self._pending.setdefault(gateway_id, {})[buffer_id] = frame
        return frame

    def ack(self, gateway_id: str, buffer_id: str) -> bool:
        """Forget ``buffer_id``; false if that gateway had no such pending delivery
        (a duplicate ack, or one for another gateway's delivery)."""
        return self._pending.get(gateway_id, {}).pop(buffer_id, None) is not None

    def frames(self, gateway_id: str) -> list[Frame]:
        """The unacknowledged deliveries of ``gateway_id``, oldest first."""
        return list(self._pending.get(gateway_id, {}).values())

    def ids(self, gateway_id: str) -> list[str]:
        return list(self._pending.get(gateway_id, {}))
