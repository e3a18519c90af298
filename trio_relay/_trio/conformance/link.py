"""One WebSocket to the connector under check, read on demand.

The relay hides what a checker must see (it acks, dedupes, redials, reads close codes
as verdicts), so the conformance check drives the link's parts itself: the real dialer,
the real upgrade and `WebSocket`, the frame codec. There is no reader task: the check
is a script, and each step reads until what it waits for has come (or its deadline),
so every frame lands in `frames` in arrival order and nothing races the script.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from ..._core.codec import FrameDecoder, RejectedFrame, encode_frame
from ..._core.endpoint import Endpoint
from ..._core.frames import CONNECTOR_FRAMES, Frame
from ..._core.url import normalize_url
from ..link.dial import TcpDialer
from ..link.ends import STREAM_ERRORS, SocketEnd, UpgradeFailed, WebSocketEnded, WriteFailed
from ..link.upgrade import upgrade
from ..link.websocket import WebSocket

__all__ = ["DialRefused", "ProbeLink", "dial"]

MAX_MESSAGE_BYTES = 1 << 22
CHECK_DONE = (1000, "conformance check done")


@dataclass(frozen=True, slots=True)
class DialRefused:
    """The dial gave no WebSocket: an HTTP answer other than ``101`` (``status``), or
    no answer at all (``status`` is ``None``: refused, reset, unreachable)."""

    cause: str
    status: int | None = None


class ProbeLink:
    """An open WebSocket to the connector, with every frame it sent so far."""

    def __init__(self, ws: WebSocket, on_frame: Callable[[ProbeLink, Frame], None]) -> None:
        self._ws = ws
        self._decoder = FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=MAX_MESSAGE_BYTES)
        self._on_frame = on_frame
        self.frames: list[Frame] = []
        self.rejected: list[RejectedFrame] = []
        self.end: SocketEnd | None = None
        """How the WebSocket ended, once it has (the connector's close frame, or 1006)."""
        self.closed_by_us = False
        self.sent_ids: set[str] = set()
        """The requestIds sent on this link (so a result for any other is a stray)."""

    @property
    def is_open(self) -> bool:
        return self.end is None

    async def send(self, *frames: Frame) -> bool:
        """Write ``frames`` as one message; false when the link is over."""
        if self.end is not None or not self._ws.can_send:
            return False
        self._ws.send_text("".join(encode_frame(f) for f in frames).encode())
        return await self._flush()

    async def ping(self, payload: bytes, timeout: float) -> bool:  # noqa: ASYNC109 (a missing pong is a verdict, not an error)
        """Send a WebSocket ping; true once its pong came within ``timeout``."""
        ponged = trio.Event()
        if not self._ws.send_ping(payload, ponged.set) or not await self._flush():
            return False
        return await self.wait_for(ponged.is_set, timeout)

    async def wait_for(self, done: Callable[[], bool], timeout: float) -> bool:  # noqa: ASYNC109 (a condition not met in time is a verdict)
        """Read until ``done()`` holds (true), or until ``timeout`` or the link's end
        (then ``done()`` once more). ``done`` is asked after every read."""
        with trio.move_on_after(timeout):
            while not done() and self.end is None:
                await self._read_once()
        return done()

    async def settle(self, seconds: float) -> None:
        """Read whatever comes in the next ``seconds`` (what must *not* arrive)."""
        await self.wait_for(lambda: False, seconds)

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 (a close handshake bounded, then the socket dropped)
        """Close with 1000 and wait (at most ``timeout``) for the connector's answer."""
        if self.end is None:
            self.closed_by_us = True
            if self._ws.send_close(*CHECK_DONE):
                await self._flush()
                await self.wait_for(lambda: False, timeout)
        self._ws.stream.close()

    async def _flush(self) -> bool:
        try:
            await self._ws.flush()
        except WriteFailed as exc:
            self.end = SocketEnd(f"write failed: {exc}", 1006)
            return False
        return True

    async def _read_once(self) -> None:
        try:
            payloads = await self._ws.receive()
        except WebSocketEnded as ended:
            self.end = ended.end
            return
        for payload in payloads:
            for item in self._decoder.feed(payload):
                if isinstance(item, RejectedFrame):
                    self.rejected.append(item)
                else:
                    self.frames.append(item)
                    self._on_frame(self, item)
        if self._ws.has_pending:  # a pong to the connector's ping, the echo of its close
            await self._flush()
        if self._ws.end is not None and self.end is None:
            self.end = self._ws.end


async def dial(
    url: str,
    bearer: str | None,
    *,
    timeout: float,  # noqa: ASYNC109 (the dial's bound is reported as a failed clause)
    on_frame: Callable[[ProbeLink, Frame], None],
    dialer: TcpDialer | None = None,
) -> ProbeLink | DialRefused:
    """Dial the connector at base ``url`` (normalised as a gateway does) and upgrade,
    presenting ``bearer`` (none: no ``Authorization`` header)."""
    endpoint = Endpoint.from_url(normalize_url(url))
    headers = [("User-Agent", "trio-relay-conformance")]
    if bearer is not None:
        headers.append(("Authorization", f"Bearer {bearer}"))
    stream = None
    try:
        with trio.fail_after(timeout):
            stream = await (dialer or TcpDialer())(endpoint)
            ws = await upgrade(
                stream, endpoint, headers=headers, max_message_bytes=MAX_MESSAGE_BYTES
            )
    except UpgradeFailed as exc:
        if stream is not None:
            stream.close()
        return DialRefused(exc.refusal.cause, exc.status)
    except trio.TooSlowError:
        if stream is not None:
            stream.close()
        return DialRefused(f"no answer to the upgrade within {timeout:g} s")
    except STREAM_ERRORS as exc:
        if stream is not None:
            stream.close()
        return DialRefused(f"dial failed: {exc}")
    return ProbeLink(ws, on_frame)
