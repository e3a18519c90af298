"""Raw HTTP helpers for tests that play a WebSocket server by hand: read a request's
head, compute the ``Sec-WebSocket-Accept`` for it (RFC 6455 §4.2.2), frame a close."""

from __future__ import annotations

import base64
import hashlib
import struct

import trio


async def read_head(stream: trio.abc.ReceiveStream) -> bytes:
    """Bytes up to and including the blank line ending a request's head (less if the
    peer closes first)."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = await stream.receive_some(65536)
        if not data:
            break
        head += data
    return head


def accept_for(head: bytes) -> str:
    key = next(
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    digest = hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
    return base64.b64encode(digest).decode()


def close_frame(code: int, reason: bytes) -> bytes:
    """A server's close frame: FIN + opcode 8, unmasked."""
    payload = struct.pack("!H", code) + reason
    return bytes([0x88, len(payload)]) + payload
