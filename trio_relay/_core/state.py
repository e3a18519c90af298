"""The relay's life cycle, as users see it."""

from __future__ import annotations

import enum


class State(enum.Enum):
    CONNECTING = "connecting"
    """Dialling for the first time; never connected yet."""
    CONNECTED = "connected"
    """Handshake done; requests are sent."""
    RECONNECTING = "reconnecting"
    """Between connections after a drop; requests fail at once."""
    DORMANT = "dormant"
    """Closed on purpose by ``go_dormant``; the redial is armed."""
    REVOKED = "revoked"
    """The connector revoked our credentials; no more dialling, requests fail at once."""
    CLOSED = "closed"
    """The relay was closed (left the ``open_relay`` block)."""
