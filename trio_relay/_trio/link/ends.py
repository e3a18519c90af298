"""What the WebSocket seam (``websocket.py``) tells the rest of the shell, in plain
types: how a socket ended, how an upgrade was refused, how a write failed, and the
upgrade's headers. Apart from the WebSocket library, so that callers and tests need no
part of it to name these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..._core.dial_failure import Refusal
from .stream import STREAM_ERRORS

ABNORMAL = 1006
"""RFC 6455's code for a connection that ended without a close frame (never sent)."""

__all__ = [
    "ABNORMAL",
    "STREAM_ERRORS",
    "SocketEnd",
    "UpgradeFailed",
    "WebSocketEnded",
    "WriteFailed",
    "upgrade_headers",
]


@dataclass(frozen=True, slots=True)
class SocketEnd:
    """How the WebSocket ended: a close frame's ``code``/``reason``; ``1006`` and no
    reason for a reset or an EOF without a close frame."""

    cause: str
    code: int | None = None
    reason: str | None = None


class WebSocketEnded(Exception):
    """Raised by `WebSocket.receive` once the socket is over."""

    def __init__(self, end: SocketEnd) -> None:
        super().__init__(end.cause)
        self.end = end


class UpgradeFailed(Exception):
    """The upgrade did not give us a WebSocket; `refusal` says how to take it."""

    def __init__(self, why: Refusal, status: int | None = None) -> None:
        super().__init__(why.cause)
        self.refusal = why
        self.status = status


class WriteFailed(Exception):
    """The stream refused a write, or a write was cut off midway (the stream is then
    unusable: a frame may be half on the wire)."""



def upgrade_headers(
    bearer: str | None, user_agent: str | None, extra: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    headers = [(name, value) for name, value in extra]
    if user_agent:
        headers.append(("User-Agent", user_agent))
    if bearer:
        headers.append(("Authorization", f"Bearer {bearer}"))
    return headers
