"""Peer clients: what a Trio user who does not pick trio_relay would write instead.

Two small Trio clients of the same shape, one on ``websockets``' own Trio implementation
(:mod:`websockets.trio`, websockets >= 17) and one on ``wsproto``: one reader task that
matches ``outbound_result`` lines to waiting requests, each request writing its own
frame (one WebSocket message per request, no writer task, no batching), a ``hello`` per
connection answered by a ``descriptor``, and a redial loop with no backoff at all.
Nothing else: no keepalive of its own, no backlog, no dedupe, no drain. They are the
yardsticks the benchmarks hold trio_relay to (issue 24), so they are written the way a
careful user would write them, not slowed down and not specialised for the benchmark:
``json`` from the standard library, a ``trio.Event`` per request, string request ids.

A request made while no connection is up fails at once (not ambiguous); a request whose
frame was written and whose connection then ended, or that timed out, is ambiguous.
"""

from __future__ import annotations

import abc
import itertools
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import wsproto
import wsproto.events as wse
import wsproto.utilities
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.trio.client import ClientConnection
from websockets.trio.client import connect as ws_connect

from ._backends import REPLIES, Client, OnMessage, Overrides, Reply, TrioRelayBackend, running

__all__ = [
    "PEERS",
    "PEER_BACKENDS",
    "PeerBackend",
    "PeerClient",
    "WebsocketsTrioClient",
    "WsprotoClient",
    "open_peer",
]

OPEN_TIMEOUT = 10.0


class SessionEnded(Exception):
    """The server ended the connection before the upgrade, or refused it."""


# What a session can end with that the redial loop absorbs (the peer went away, refused
# the upgrade, or broke the WebSocket protocol).
_SESSION_ENDS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                 trio.TooSlowError, ConnectionClosed, InvalidHandshake, SessionEnded,
                 wsproto.utilities.LocalProtocolError,
                 wsproto.utilities.RemoteProtocolError)  # fmt: skip


class _Waiter:
    __slots__ = ("event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: dict[str, Any] | None = None


class PeerClient(abc.ABC):
    """The shared part: requests, result matching, the redial loop. A subclass opens a
    session, writes one line, and feeds every received text message to :meth:`_feed`."""

    name: str

    def __init__(self, url: str, *, platform: str = "relay", bot_id: str = "") -> None:
        parts = urllib.parse.urlsplit(url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path.rstrip("/") + "/relay"
        self.url = urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))
        self._hello = _line({"type": "hello", "platform": platform, "botId": bot_id})
        self._pending: dict[str, _Waiter] = {}
        self._ids = itertools.count()
        self._partial = ""
        self._described = trio.Event()
        self._connected = False
        self._connected_event = trio.Event()
        self.connects = 0
        self.drops = 0
        self.dial_failures = 0
        self.seen_at: float | None = None
        """``time.monotonic()`` when the reader last saw its connection end (for
        redial_steps.py: how soon a plain Trio socket read notices a reset)."""

    @property
    def connected(self) -> bool:
        return self._connected

    async def wait_connected(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._connected_event.wait()
            return
        raise TimeoutError(f"{self.name}: not connected within {timeout} s")

    async def request(self, action: dict[str, Any], timeout: float) -> Reply:
        """Send one ``outbound`` and wait for its result."""
        if not self._connected:
            return REPLIES[False, False]
        request_id = str(next(self._ids))
        waiter = _Waiter()
        self._pending[request_id] = waiter
        try:
            try:
                await self._send(
                    _line({"type": "outbound", "requestId": request_id, "action": action})
                )
            except _SESSION_ENDS:
                return REPLIES[False, False]
            with trio.move_on_after(timeout):
                await waiter.event.wait()
            result = waiter.result
            if result is None:  # timed out, or the connection ended after the write
                return REPLIES[False, True]
            return REPLIES[bool(result.get("success")), False]
        finally:
            self._pending.pop(request_id, None)

    async def run(self) -> None:
        """Dial, handshake, read until the connection ends; again, at once, forever."""
        while True:
            self._partial = ""
            self._described = trio.Event()
            try:
                await self._session()
            except _SESSION_ENDS:
                pass
            finally:
                if self._connected:
                    self.drops += 1
                else:
                    self.dial_failures += 1
                self._connected = False
                self._connected_event = trio.Event()
                pending, self._pending = self._pending, {}
                for waiter in pending.values():
                    waiter.event.set()  # result None: ambiguous, the frame was written
            await trio.lowlevel.checkpoint()  # a cancelled run ends here, not in a dial

    def _feed(self, message: str) -> None:
        *lines, self._partial = (self._partial + message).split("\n")
        for line in lines:
            if not line:
                continue
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            kind = frame.get("type")
            if kind == "outbound_result":
                waiter = self._pending.pop(str(frame.get("requestId")), None)
                if waiter is not None:
                    result = frame.get("result")
                    waiter.result = result if isinstance(result, dict) else {}
                    waiter.event.set()
            elif kind == "descriptor":
                self._described.set()

    async def _handshaken(self) -> None:
        """After the upgrade: one ``hello``, then connected once the reader has seen the
        ``descriptor``. Called by a subclass with its reader already running."""
        await self._send(self._hello)
        with trio.fail_after(OPEN_TIMEOUT):
            await self._described.wait()
        self.connects += 1
        self._connected = True
        self._connected_event.set()

    @abc.abstractmethod
    async def _session(self) -> None:
        """One connection, from the dial until it ends (returns or raises)."""

    @abc.abstractmethod
    async def _send(self, line: str) -> None: ...


def _line(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":")) + "\n"


class WebsocketsTrioClient(PeerClient):
    """On :mod:`websockets.trio`: its connection runs its own frame-reading task; ours
    reads whole messages from it."""

    name = "websockets.trio"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self._ws: ClientConnection | None = None

    async def _session(self) -> None:
        # No compression (the relay's protocol does not use it), no proxy lookup.
        async with ws_connect(
            self.url, compression=None, proxy=None, open_timeout=OPEN_TIMEOUT, max_size=None
        ) as ws:
            self._ws = ws
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, ws, nursery.cancel_scope)
                    await self._handshaken()
            finally:
                self._ws = None

    async def _read(self, ws: ClientConnection, scope: trio.CancelScope) -> None:
        try:
            while True:
                message = await ws.recv()
                self._feed(message if isinstance(message, str) else message.decode())
        except ConnectionClosed:
            self.seen_at = time.monotonic()
        finally:
            scope.cancel()

    async def _send(self, line: str) -> None:
        ws = self._ws
        if ws is None:
            raise trio.BrokenResourceError("not connected")
        await ws.send(line)


class WsprotoClient(PeerClient):
    """On ``wsproto`` over a ``trio.SocketStream``: the reader task feeds the socket's
    bytes to the sans-I/O connection; a write takes a lock (a Trio stream allows one
    ``send_all`` at a time) and sends the bytes wsproto returns."""

    name = "wsproto"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self._stream: trio.SocketStream | None = None
        self._ws: wsproto.WSConnection | None = None
        self._lock = trio.Lock()
        self._text: list[str] = []

    async def _session(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        with trio.fail_after(OPEN_TIMEOUT):
            stream = await trio.open_tcp_stream(parts.hostname or "", parts.port or 80)
        async with stream:
            ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
            self._ws, self._stream, self._text = ws, stream, []
            try:
                await stream.send_all(ws.send(wse.Request(host=parts.netloc, target=parts.path)))
                with trio.fail_after(OPEN_TIMEOUT):
                    await self._upgrade(stream, ws)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, stream, ws, nursery.cancel_scope)
                    await self._handshaken()
            finally:
                self._ws = self._stream = None

    async def _upgrade(self, stream: trio.SocketStream, ws: wsproto.WSConnection) -> None:
        while True:
            data = await stream.receive_some()
            ws.receive_data(data or None)
            if not data:
                raise SessionEnded("the server closed before the upgrade")
            for event in ws.events():
                if isinstance(event, wse.AcceptConnection):
                    return
                if isinstance(event, wse.RejectConnection):
                    raise SessionEnded(f"upgrade refused: HTTP {event.status_code}")

    async def _read(
        self, stream: trio.SocketStream, ws: wsproto.WSConnection, scope: trio.CancelScope
    ) -> None:
        try:
            while True:
                data = await stream.receive_some()
                ws.receive_data(data or None)
                for event in ws.events():
                    if isinstance(event, wse.TextMessage):
                        self._text.append(event.data)
                        if event.message_finished:
                            message, self._text = "".join(self._text), []
                            self._feed(message)
                    elif isinstance(event, wse.Ping):
                        await self._write(ws.send(event.response()))
                    elif isinstance(event, wse.CloseConnection):
                        return
                if not data:
                    self.seen_at = time.monotonic()
                    return
        except _SESSION_ENDS:
            self.seen_at = time.monotonic()
        finally:
            scope.cancel()

    async def _write(self, data: bytes) -> None:
        stream = self._stream
        if stream is None:
            raise trio.BrokenResourceError("not connected")
        async with self._lock:
            await stream.send_all(data)

    async def _send(self, line: str) -> None:
        ws = self._ws
        if ws is None:
            raise trio.BrokenResourceError("not connected")
        await self._write(ws.send(wse.Message(data=line)))


PEERS: dict[str, type[PeerClient]] = {
    WebsocketsTrioClient.name: WebsocketsTrioClient,
    WsprotoClient.name: WsprotoClient,
}


@asynccontextmanager
async def open_peer(name: str, url: str) -> AsyncIterator[PeerClient]:
    """A running peer client of ``PEERS[name]`` for ``url`` (the connector's base URL);
    it dials at once and redials, with no backoff, until the block exits."""
    async with running(PEERS[name](url)) as client:
        yield client


class PeerBackend(TrioRelayBackend):
    """A peer client behind the benchmarks' :class:`~._backends.Backend` interface: the
    same Trio loop, sleep, gather and control channel as trio_relay's, its own client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = "trio"

    @asynccontextmanager
    async def client(
        self, url: str, overrides: Overrides, on_message: OnMessage | None = None
    ) -> AsyncIterator[Client]:
        if on_message is not None or overrides:
            raise ValueError(f"the {self.name} peer takes no options and handles no inbound")
        async with open_peer(self.name, url) as client:
            yield client

    def config(self, overrides: Overrides) -> dict[str, Any]:
        keepalive = {
            WebsocketsTrioClient.name: "websockets' own (a ping every 20 s)",
            WsprotoClient.name: "none (it answers pings)",
        }[self.name]
        return {"client": self.name, "backoff": 0.0, "keepalive": keepalive}


PEER_BACKENDS: tuple[PeerBackend, ...] = tuple(PeerBackend(name) for name in PEERS)
