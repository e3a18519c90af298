"""A raw platform webhook forwarded by the connector (``passthrough_forward``, in
docs/protocol.md, "Frames, connector to gateway").

Slash commands and button presses arrive as the platform's own HTTP request, so the
handler can verify the platform's signature over the exact bytes. Decoding is lenient:
a malformed part becomes its default rather than losing the webhook, and the wire object
stays in [`PassthroughForward.raw`][trio_relay.PassthroughForward.raw].

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from .frames import FrameError

__all__ = ["PassthroughForward"]


def _str(obj: dict[str, Any], key: str, default: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) and value else default


def _headers(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        (pair[0], pair[1])
        for pair in value
        if isinstance(pair, (list, tuple))
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
    )


def _body(value: object) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        # validate=True: without it, b64decode silently skips stray characters and
        # hands the handler a body whose signature can never verify.
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII text
        return b""


@dataclass(frozen=True)
class PassthroughForward:
    """One forwarded webhook request: its target identity, HTTP method, path, headers
    (in wire order, duplicates kept) and body bytes."""

    platform: str = ""
    bot_id: str = ""
    method: str = "POST"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    profile: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)

    @classmethod
    def from_wire(cls, obj: object) -> PassthroughForward:
        """Decode a frame's ``forward`` object; raises `FrameError` only if it
        is not an object."""
        if not isinstance(obj, dict):
            raise FrameError(f"forward must be an object, got {type(obj).__name__}")
        profile = obj.get("profile")
        return cls(
            platform=_str(obj, "platform", ""),
            bot_id=_str(obj, "botId", ""),
            method=_str(obj, "method", "POST").upper(),
            path=_str(obj, "path", "/"),
            headers=_headers(obj.get("headers")),
            body=_body(obj.get("bodyB64")),
            profile=profile if isinstance(profile, str) else None,
            raw=dict(obj),
        )
