"""The asyncio baseline the benchmarks compare against (benchmarks/baseline.py).

It runs on asyncio, so these are plain sync tests that call ``asyncio.run``; the
connector is a small asyncio ``websockets`` server written here, on loopback.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from trio_relay_benchmarks.baseline import (
    BaselineConfig,
    BaselineRelay,
    _LineBuffer,
)
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from trio_relay._core.token import verify_token


def _descriptor(platform: str) -> dict[str, Any]:
    return {
        "type": "descriptor",
        "descriptor": {
            "contract_version": 1,
            "platform": platform,
            "label": platform,
            "max_message_length": 4096,
            "supports_draft_streaming": False,
            "supports_edit": True,
            "supports_threads": False,
            "markdown_dialect": "plain",
            "len_unit": "chars",
        },
    }


def _line(frame: dict[str, Any]) -> str:
    return json.dumps(frame) + "\n"


# What the connector does with an ``outbound``: answer it, ignore it, or drop the socket.
OnOutbound = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


async def answer(ws: ServerConnection, frame: dict[str, Any]) -> None:
    result = {
        "type": "outbound_result",
        "requestId": frame["requestId"],
        "result": {"success": True},
    }
    await ws.send(_line(result))


async def ignore(ws: ServerConnection, frame: dict[str, Any]) -> None:
    pass


async def drop(ws: ServerConnection, frame: dict[str, Any]) -> None:
    await ws.close(1011, "boom")


class Connector:
    """A minimal connector: descriptor per hello, then ``on_outbound`` per request."""

    def __init__(self, on_outbound: OnOutbound = answer) -> None:
        self.on_outbound = on_outbound
        self.connections = 0
        self.frames: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        #: close each connection right after its handshake (count of times left)
        self.close_after_handshake = 0
        #: frames sent after the descriptors, as one WebSocket message
        self.after_handshake = ""
        #: split each descriptor line across two WebSocket messages
        self.split_descriptors = False
        self.port = 0

    async def handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        assert ws.request is not None
        self.auth_headers.append(ws.request.headers.get("Authorization"))
        buf = ""
        try:
            async for message in ws:
                assert isinstance(message, str)
                *lines, buf = (buf + message).split("\n")
                for line in lines:
                    frame = json.loads(line)
                    self.frames.append(frame)
                    if frame["type"] == "hello":
                        text = _line(_descriptor(frame["platform"]))
                        if self.split_descriptors:
                            await ws.send(text[:10])
                            await ws.send(text[10:])
                        else:
                            await ws.send(text)
                        if self.after_handshake:
                            await ws.send(self.after_handshake)
                        if self.close_after_handshake > 0:
                            self.close_after_handshake -= 1
                            await ws.close(1000)
                            return
                    elif frame["type"] == "outbound":
                        await self.on_outbound(ws, frame)
        except ConnectionClosed:
            pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@asynccontextmanager
async def running(connector: Connector) -> AsyncIterator[Connector]:
    async with serve(connector.handler, "127.0.0.1", 0) as server:
        connector.port = server.sockets[0].getsockname()[1]
        yield connector


def fast(**kwargs: Any) -> BaselineConfig:
    kwargs.setdefault("request_timeout", 2.0)
    kwargs.setdefault("handshake_timeout", 2.0)
    return BaselineConfig(**kwargs)


def run(coro: Awaitable[None]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro, 5)

    asyncio.run(bounded())


def test_line_buffer_keeps_partial_lines_and_skips_junk() -> None:
    buf = _LineBuffer()
    assert buf.feed('{"type":"a"}\n{"ty') == [{"type": "a"}]
    assert buf.feed('pe":"b"}\nnot json\n[1]\n\n{"type":"c"}\n') == [
        {"type": "b"},
        {"type": "c"},
    ]
    assert buf.feed(b'{"type":"d"}\n') == [{"type": "d"}]


def test_round_trip() -> None:
    async def main() -> None:
        async with running(Connector()) as c, BaselineRelay(c.url, fast()) as relay:
            await relay.wait_connected(2)
            assert relay.connected
            out = await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
            assert (out.success, out.ambiguous, out.error) == (True, False, None)
            assert out.result == {"success": True}
            hello = c.frames[0]
            assert hello == {"type": "hello", "platform": "relay", "botId": ""}
            outbound = c.frames[1]
            assert outbound["type"] == "outbound"
            assert outbound["action"] == {"op": "send", "chat_id": "C1", "content": "hi"}
            assert relay.stats["dials"] == relay.stats["connects"] == 1
            assert c.auth_headers == [None]
        assert not relay.connected
        closed = await relay.request({"op": "typing", "chat_id": "C1"})
        assert (closed.success, closed.ambiguous, closed.error) == (False, False, "client closed")

    run(main())


def test_handshake_per_identity_with_auth_and_split_frames() -> None:
    async def main() -> None:
        connector = Connector()
        connector.split_descriptors = True
        # Frames after the descriptors share a message with nothing else we need; the
        # buffered inbound must be acked, the junk skipped without ending the socket.
        connector.after_handshake = (
            '{"type":"inbound","event":{"text":"x"},"bufferId":"b1"}\nnot json\n'
        )
        cfg = fast(
            identities=[("slack", "B1"), ("discord", "D1")],
            gateway_id="gw",
            secret="s3cret",
        )
        async with running(connector) as c, BaselineRelay(c.url, cfg) as relay:
            await relay.wait_connected(2)
            out = await relay.request({"op": "typing", "chat_id": "C1"})
            assert out.success
            hellos = [f for f in c.frames if f["type"] == "hello"]
            assert [(f["platform"], f["botId"]) for f in hellos] == [
                ("slack", "B1"),
                ("discord", "D1"),
            ]
            assert {"type": "inbound_ack", "bufferId": "b1"} in c.frames
            header = c.auth_headers[0]
            assert header is not None and header.startswith("Bearer ")
            check = verify_token(header.removeprefix("Bearer "), {"gw": "s3cret"}, now=time.time())
            assert check.ok

    run(main())


def test_request_when_not_connected_fails_at_once_definite() -> None:
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        async with BaselineRelay(f"http://127.0.0.1:{port}", fast()) as relay:
            dials = relay.stats["dials"]
            out = await relay.request({"op": "typing", "chat_id": "C1"})
            assert relay.stats["dials"] == dials  # failed without waiting for a dial
            assert (out.success, out.ambiguous, out.error) == (False, False, "not connected")
            assert not relay.connected
            with pytest.raises(TimeoutError):
                await relay.wait_connected(0.05)

    run(main())


def test_drop_while_request_in_flight_is_ambiguous() -> None:
    async def main() -> None:
        cfg = fast(backoff_initial=5.0)  # no redial during the test
        async with running(Connector(drop)) as c, BaselineRelay(c.url, cfg) as relay:
            await relay.wait_connected(2)
            out = await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
            assert (out.success, out.ambiguous, out.error) == (False, True, "connection lost")
            assert not relay.connected
            assert relay.stats["drops"] == 1
            assert relay.last_close_code == 1011
            # Between connections: fails at once, definite.
            after = await relay.request({"op": "typing", "chat_id": "C1"})
            assert (after.success, after.ambiguous, after.error) == (False, False, "not connected")

    run(main())


def test_redial_after_server_closes() -> None:
    async def main() -> None:
        connector = Connector()
        connector.close_after_handshake = 2
        cfg = fast(backoff_initial=0.0)
        async with running(connector) as c, BaselineRelay(c.url, cfg) as relay:
            while relay.stats["connects"] < 3:
                await asyncio.sleep(0.005)
            await relay.wait_connected(2)
            out = await relay.request({"op": "typing", "chat_id": "C1"})
            assert out.success
            assert c.connections == 3
            assert relay.stats["drops"] == 2
            assert relay.stats["dials"] == 3

    run(main())


def test_timeout_is_ambiguous() -> None:
    async def main() -> None:
        cfg = fast(request_timeout=0.2)
        async with running(Connector(ignore)) as c, BaselineRelay(c.url, cfg) as relay:
            await relay.wait_connected(2)
            start = time.monotonic()
            out = await relay.request({"op": "typing", "chat_id": "C1"})
            elapsed = time.monotonic() - start
            assert (out.success, out.ambiguous, out.error) == (False, True, "timeout")
            assert 0.15 < elapsed < 1.0
            # A per-call timeout overrides the config's.
            out = await relay.request({"op": "typing", "chat_id": "C1"}, timeout=0.05)
            assert out.ambiguous
            assert relay.connected  # a timeout does not end the connection

    run(main())


def test_backoff_ladder_doubles_and_caps() -> None:
    """The waits between failed dials follow uniform(d/2, d) with d doubling to the cap."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []

    class Recorder(random.Random):
        def uniform(self, a: float, b: float) -> float:
            waits.append(b)
            assert a == b / 2
            return 0.0

    async def main() -> None:
        cfg = fast(backoff_initial=1.0, backoff_max=4.0)
        async with BaselineRelay(f"http://127.0.0.1:{port}", cfg, rng=Recorder()) as relay:
            while relay.stats["dials"] < 5:
                await asyncio.sleep(0.005)

    run(main())
    assert waits[:4] == [1.0, 2.0, 4.0, 4.0]
