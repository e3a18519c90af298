"""The WebSocket upgrade: the ``101`` or a classified refusal, and the open
`WebSocket` it gives.

The only other module that imports the WebSocket library (beside ``websocket.py``).
The request is written here, and a plain ``101`` (the answer of every healthy dial) is
checked here too: status line, ``Upgrade``, ``Connection``, ``Sec-WebSocket-Accept``,
no extension or subprotocol. Every other answer — a refusal, garbage, an EOF, a ``101``
with anything unusual about it — goes to the library's ``ClientProtocol`` with the same
key, which judges it exactly as it judges any answer; what a refusal means for the
redial is decided in ``_core/dial_failure.py``. Why our own request and check: the
library's handshake (its ``Request``, ``Headers`` and generator-driven parser) cost
about 330,000 CPU instructions a dial, a seventh of a whole redial under callgrind
(``trio-relay bench cost``); the check of a plain ``101`` here costs a tenth of that.
With ``compression`` the library writes the request and reads the answer itself (the
extension's negotiation is its own).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import (
    InvalidHandshake,
    InvalidHeader,
    InvalidMessage,
    InvalidStatus,
    InvalidUpgrade,
    NegotiationError,
)
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.http11 import MAX_LINE_LENGTH, MAX_NUM_HEADERS, Response
from websockets.protocol import Protocol, Side, State
from websockets.uri import WebSocketURI

from ..._core.dial_failure import Refusal, bad_handshake, describe_error, refusal
from ..._core.dial_failure import retry_after_seconds as _retry_after
from ..._core.endpoint import ByteStream, Endpoint
from ..._core.random_pool import RandomPool
from .ends import STREAM_ERRORS, UpgradeFailed
from .websocket import RECEIVE_SIZE, WebSocket

__all__ = ["upgrade"]


class _Quiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The protocol's logger: never at DEBUG, where it would print the upgrade's
    headers (the bearer token among them) whenever a user debugs their own program."""

    def isEnabledFor(self, level: int) -> bool:
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_LOGGER = _Quiet(logging.getLogger("trio_relay.websocket"), {})

_KEYS = RandomPool(16, 64)
"""``Sec-WebSocket-Key`` nonces (RFC 6455 §4.1: 16 random bytes, base64)."""
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# What the check of a plain 101 takes, no more (anything else goes to the library):
_STATUS_101 = re.compile(rb"HTTP/1\.1 101 [\x09\x20-\x7e\x80-\xff]*")
_HEADER = re.compile(rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*([\x09\x20-\x7e\x80-\xff]*?)[ \t]*")
"""RFC 9110's token for the name and field value for the value, as the library's parser
(websockets.http11) takes them."""
_UNUSUAL = frozenset((b"sec-websocket-extensions", b"sec-websocket-protocol"))
"""Headers a plain ``101`` to our request has not: the library judges their values."""


def _uri(endpoint: Endpoint) -> WebSocketURI:
    path, _, query = endpoint.resource.partition("?")
    return WebSocketURI(endpoint.secure, endpoint.host, endpoint.port, path or "/", query)


def _request(endpoint: Endpoint, key: bytes, headers: Sequence[tuple[str, str]]) -> bytes:
    """The upgrade request, byte for byte what the library's ``ClientProtocol`` writes
    (the same header order, ``Host`` without a default port, IPv6 in brackets)."""
    path, _, query = endpoint.resource.partition("?")
    target = (path or "/") + (f"?{query}" if query else "")
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    return (
        f"GET {target} HTTP/1.1\r\n".encode("ascii")
        + f"Host: {endpoint.host_header}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n".encode(
            "iso-8859-1"
        )
    )


def _plain_101(received: bytes | bytearray, accept: bytes) -> bool | None:
    """Whether the answer's head, as far as ``received`` has it, is that of a plain
    ``101`` to our request: True when it is (the head is complete), None while it may
    still be (more to come), False as soon as a line is not (the library's parser fails
    on a complete line, or on one too long: at the same read)."""
    end = received.find(b"\r\n\r\n")
    lines = (received if end < 0 else received[: end + 2]).split(b"\r\n")
    if end < 0:
        partial = lines.pop()
        if b"\n" in partial or len(partial) + 2 > MAX_LINE_LENGTH:
            return False
        if not lines:
            return None
    if not _STATUS_101.fullmatch(lines[0]) or len(lines) > MAX_NUM_HEADERS + 2:
        return False
    upgrade = connection = accepted = False
    for line in lines[1:]:
        if not line:  # the head's end
            return upgrade and connection and accepted
        if len(line) + 2 > MAX_LINE_LENGTH:
            return False
        header = _HEADER.fullmatch(line)
        if header is None:
            return False
        name, value = header[1].lower(), header[2]
        if name == b"upgrade":
            if upgrade or value.lower() != b"websocket":
                return False
            upgrade = True
        elif name == b"connection":
            if connection or value.lower() != b"upgrade":
                return False
            connection = True
        elif name == b"sec-websocket-accept":
            if accepted or value != accept:
                return False
            accepted = True
        elif name in _UNUSUAL:
            return False
    return None  # (the head goes on)


async def upgrade(
    stream: ByteStream,
    endpoint: Endpoint,
    *,
    headers: Sequence[tuple[str, str]],
    max_message_bytes: int,
    compression: bool = False,
) -> WebSocket:
    """The WebSocket upgrade over ``stream``; the caller bounds it in time.

    Raises `UpgradeFailed` for any answer but a valid ``101`` — at once, also
    for an EOF, a reset or garbage instead of an HTTP response — and lets the stream's
    own errors through. Redirects are not followed.
    """
    if compression:
        protocol = ClientProtocol(
            _uri(endpoint),
            extensions=[ClientPerMessageDeflateFactory()],
            max_size=max_message_bytes,
            logger=_LOGGER,
        )
        request = protocol.connect()
        for name, value in headers:
            request.headers[name] = value
        protocol.send_request(request)
        await stream.send_all(b"".join(protocol.data_to_send()))
        return await _judged(stream, protocol, b"", max_message_bytes)
    key = base64.b64encode(_KEYS.next())
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    await stream.send_all(_request(endpoint, key, headers))
    received: bytes | bytearray = b""
    while True:
        data = await _receive(stream)
        if not data:
            break  # the library says what an answer cut short by an EOF is
        received += data
        verdict = _plain_101(received, accept)
        if verdict is True:
            # The library's protocol for the frames, open from the start (its client
            # subclass adds only the handshake, done here).
            backlog = received[received.find(b"\r\n\r\n") + 4 :]
            opened = Protocol(
                Side.CLIENT, state=State.OPEN, max_size=max_message_bytes, logger=_LOGGER
            )
            return WebSocket(stream, opened, max_message_bytes, backlog)
        if verdict is False:
            break
    protocol = ClientProtocol(_uri(endpoint), max_size=max_message_bytes, logger=_LOGGER)
    protocol.key = key.decode()
    return await _judged(stream, protocol, received, max_message_bytes, eof=not data)


async def _receive(stream: ByteStream) -> bytes | bytearray:
    try:
        return await stream.receive_some(RECEIVE_SIZE)
    except STREAM_ERRORS as exc:
        raise UpgradeFailed(
            Refusal(
                f"upgrade failed: {describe_error(exc, handshake_done=True)} "
                "before the server answered"
            )
        ) from None


async def _judged(
    stream: ByteStream,
    protocol: ClientProtocol,
    received: bytes | bytearray,
    max_message_bytes: int,
    *,
    eof: bool = False,
) -> WebSocket:
    """The library's verdict on the answer, from the bytes ``received`` so far (and
    the EOF after them) on: the open WebSocket of a ``101`` it accepts, else the
    classified refusal."""
    head: bytes | bytearray | None = b""
    pending: list[bytes | bytearray] = [received] if received else []
    if eof:
        pending.append(b"")
    while True:
        data = pending.pop(0) if pending else await _receive(stream)
        backlog: bytes | bytearray = b""
        if head is not None and data:
            # The protocol gets the answer's head alone: after a 101 the frames are cut
            # by the WebSocket (_core/ws_frames.py), which must start at a frame boundary.
            # Any other answer may have a body, which the protocol reads as it likes.
            seen = len(head)
            head += data
            end = head.find(b"\r\n\r\n", max(seen - 3, 0))
            if end >= 0:
                data, backlog = data[: end + 4 - seen], data[end + 4 - seen :]
                head = None
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        events = protocol.events_received()
        if protocol.handshake_exc is not None:
            raise _refused(protocol.handshake_exc, events) from None
        if events:
            # The protocol's parser keeps the 101 response alive for the connection's
            # whole life (a local of its generator); its headers are of no further use,
            # so they are dropped here rather than held by every idle relay.
            response = events[0]
            if isinstance(response, Response):
                response.headers.clear()
            return WebSocket(stream, protocol, max_message_bytes, backlog)
        if backlog:
            protocol.receive_data(backlog)  # not a 101: the start of its body
            events = protocol.events_received()
            if protocol.handshake_exc is not None:
                raise _refused(protocol.handshake_exc, events) from None
        if not data:
            raise UpgradeFailed(Refusal("upgrade failed: connection closed before the answer"))


def _refused(exc: Exception, events: list[Any]) -> UpgradeFailed:
    response = events[0] if events and isinstance(events[0], Response) else None
    if isinstance(exc, InvalidStatus):
        response = exc.response
        status = response.status_code
        retry_after = _retry_after(response.headers.get("Retry-After"), now=time.time())
        return UpgradeFailed(refusal(status, response.reason_phrase, retry_after), status)
    if isinstance(exc, InvalidMessage):
        cause = exc.__cause__
        if isinstance(cause, EOFError):
            detail = "connection closed before a complete HTTP answer"
        else:
            detail = f"not an HTTP answer ({cause or exc})"
        return UpgradeFailed(Refusal(f"upgrade failed: {detail}"))
    answered = response.status_code if response is not None else None
    if isinstance(exc, (InvalidHeader, InvalidUpgrade, NegotiationError, InvalidHandshake)):
        return UpgradeFailed(bad_handshake(str(exc)), answered)
    return UpgradeFailed(bad_handshake(f"{type(exc).__name__}: {exc}"), answered)
