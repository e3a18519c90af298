"""The WebSocket upgrade: the ``101`` or a classified refusal, and the open
`WebSocket` it gives.

The only other module that imports the WebSocket library (beside ``websocket.py``):
here the ``ClientProtocol`` is made, sends the request and reads the answer; what a
refusal means for the redial is decided in ``_core/dial_failure.py``.
"""

from __future__ import annotations

import logging
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
from websockets.http11 import Response
from websockets.uri import WebSocketURI

from ..._core.dial_failure import Refusal, bad_handshake, describe_error, refusal
from ..._core.dial_failure import retry_after_seconds as _retry_after
from ..._core.endpoint import ByteStream, Endpoint
from .ends import STREAM_ERRORS, UpgradeFailed
from .websocket import RECEIVE_SIZE, WebSocket

__all__ = ["upgrade"]


class _Quiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The protocol's logger: never at DEBUG, where it would print the upgrade's
    headers (the bearer token among them) whenever a user debugs their own program."""

    def isEnabledFor(self, level: int) -> bool:
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_LOGGER = _Quiet(logging.getLogger("trio_relay.websocket"), {})


def _uri(endpoint: Endpoint) -> WebSocketURI:
    path, _, query = endpoint.resource.partition("?")
    return WebSocketURI(endpoint.secure, endpoint.host, endpoint.port, path or "/", query)


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
    protocol = ClientProtocol(
        _uri(endpoint),
        extensions=[ClientPerMessageDeflateFactory()] if compression else None,
        max_size=max_message_bytes,
        logger=_LOGGER,
    )
    request = protocol.connect()
    for name, value in headers:
        request.headers[name] = value
    protocol.send_request(request)
    await stream.send_all(b"".join(protocol.data_to_send()))
    head: bytes | bytearray | None = b""
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except STREAM_ERRORS as exc:
            raise UpgradeFailed(
                Refusal(
                    f"upgrade failed: {describe_error(exc, handshake_done=True)} "
                    "before the server answered"
                )
            ) from None
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
