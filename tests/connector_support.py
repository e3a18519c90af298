"""A raw gateway for tests of the reference connector: a trio-websocket client that
speaks newline-delimited JSON by hand, so what the connector puts on the wire is seen
exactly, with none of trio_relay's own checks in between."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from trio_relay.testing import ReferenceConnector

VALID = {
    "send": {"op": "send", "chat_id": "C1", "content": "hi"},
    "edit": {"op": "edit", "chat_id": "C1", "message_id": "m1", "content": "hi!"},
    "typing": {"op": "typing", "chat_id": "C1"},
}
"""A well-formed action of each legacy op the tests send by name."""


def outbound(request_id: str, op: str = "send", **fields: Any) -> str:
    """An ``outbound`` line: the valid action of ``op`` with ``fields`` changed."""
    action = {**VALID.get(op, {"op": op}), **fields}
    return line({"type": "outbound", "requestId": request_id, "action": action})


def line(obj: dict[str, Any]) -> str:
    return json.dumps(obj) + "\n"


def hello(platform: str = "slack", bot: str = "B1") -> str:
    return line({"type": "hello", "platform": platform, "botId": bot})


class Peer:
    """A raw gateway: a trio-websocket client plus a newline-JSON line buffer."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self._lines: list[str] = []
        self._partial = ""
        self.messages = 0

    async def send(self, *lines: str) -> None:
        await self.ws.send_message("".join(lines))

    async def frame(self) -> dict[str, Any]:
        while not self._lines:
            message = await self.ws.get_message()
            assert isinstance(message, str)
            self.messages += 1
            *complete, self._partial = (self._partial + message).split("\n")
            self._lines.extend(complete)
        obj: dict[str, Any] = json.loads(self._lines.pop(0))
        return obj

    async def frames(self, count: int) -> list[dict[str, Any]]:
        return [await self.frame() for _ in range(count)]

    async def handshake(self, platform: str = "slack") -> dict[str, Any]:
        await self.send(hello(platform))
        descriptor = await self.frame()
        assert descriptor["type"] == "descriptor"
        return descriptor

    async def closed(self) -> tuple[int, str | None]:
        """Read until the connection ends; its close code and reason."""
        with trio.fail_after(2):
            while True:
                try:
                    await self.ws.get_message()
                except ConnectionClosed as exc:
                    assert exc.reason is not None
                    return exc.reason.code, exc.reason.reason


@asynccontextmanager
async def dial(
    connector: ReferenceConnector, *, token: str | None = None, path: str = "/relay"
) -> AsyncIterator[Peer]:
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token else None
    url = f"ws://127.0.0.1:{connector.port}{path}"
    async with open_websocket_url(
        url, extra_headers=headers, connect_timeout=2, disconnect_timeout=0.5
    ) as ws:
        yield Peer(ws)


