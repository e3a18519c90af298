"""The Trio floor for ``throughput``, ``inflight`` and ``redial``: the least a Trio client
can spend per request, per reset and per redial on this wire, so that a target can be
held against what no Trio client can pass.

It has trio_relay's shape and nothing else: one reader task that wakes the waiting
callers, a request written straight to the socket when nobody is writing and queued for
one writer task (parked between bursts, woken by the first frame queued) while a burst
is under way, every frame of a burst in one WebSocket message. What it leaves out is
everything a real client must do per request, so its figure is a floor, not a rival:

- no JSON: an action is encoded once and reused (cached by identity), a result is
  recognised by its prefix and its request id sliced out, its fields never read;
- no validation of what arrives (it would misread anything but the fast connector);
- no timeouts, no deadlines, no cancellation bookkeeping beyond forgetting the waiter;
- a zero masking key (valid, RFC 6455 5.3: the XOR leaves the payload as it is);
- a plain non-blocking socket driven by ``trio.lowlevel.wait_readable`` and
  ``wait_writable`` (what ``trio.SocketStream`` does underneath, minus its checks).

Use it only against the benchmarks' connectors: :mod:`.fast_connector` (``throughput``)
and the reference connector with its controls (``inflight``, ``redial``), whose frames
it reads without checking them.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from outcome import Value

from ._backends import REPLIES, Client, OnMessage, Overrides, Reply, TrioRelayBackend, running

__all__ = ["FLOOR_BACKEND", "FLOOR_CLIENT", "FloorBackend", "FloorClient"]

NAME = "Trio floor"
FLOOR_CLIENT = f"the {NAME} client"
"""How reports name it."""

_RESULT = b'{"type":"outbound_result","requestId":"'
_SUCCESS = b'","result":{"success":true}}'
# Either connector's spacing: the fast one's json.dumps default, the reference one's compact.
_DESCRIPTORS = (b'"type": "descriptor"', b'"type":"descriptor"')
# Any valid key does: the server only checks that it is 16 bytes, base64-encoded.
_UPGRADE = (
    "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
_ID_AT = len(_RESULT)
_READ_SIZE = 1 << 18
_SUCCEEDED = REPLIES[True, False]
_ENDED = REPLIES[False, True]
# (an outcome can be unwrapped once: every wake-up builds its own, as trio_relay's do)


def _abort(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED


def _frame(payload: bytes) -> bytes:
    """One client text frame, FIN set, masked with the zero key."""
    n = len(payload)
    if n < 126:
        header = bytes((0x81, 0x80 | n))
    elif n < 1 << 16:
        header = bytes((0x81, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x81, 0x80 | 127)) + n.to_bytes(8, "big")
    return header + b"\0\0\0\0" + payload


class FloorClient:
    """See the module docstring. ``run`` dials, and dials again at once whenever the
    connection ends (``bench inflight`` resets it every round)."""

    name = NAME

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._path = parts.path.rstrip("/") + "/relay"
        self._sock: socket.socket | None = None
        self._pending: dict[int, trio.lowlevel.Task] = {}
        self._next_id = 0
        self._queue: list[bytes] = []
        self._writer: trio.lowlevel.Task | None = None
        """The writer, while it is parked waiting for a queued frame."""
        self._writing = False
        self._leftover = b""
        """What the socket did not take of a direct write: the writer sends it first."""
        self._burst = False
        self._actions: dict[int, tuple[dict[str, Any], bytes]] = {}
        self._connected = trio.Event()
        self.connects = 0
        self.drops = 0

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and self._sock is not None

    async def wait_connected(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._connected.wait()
            return
        raise TimeoutError(f"{NAME}: not connected within {timeout:g} s")

    async def request(self, action: dict[str, Any], timeout: float) -> Reply:
        """Write one ``outbound`` and wait for its result (``timeout`` is not kept)."""
        sock = self._sock
        if sock is None:
            return REPLIES[False, False]
        cached = self._actions.get(id(action))
        if cached is None or cached[0] is not action:
            encoded = json.dumps(action, separators=(",", ":")).encode()
            cached = self._actions[id(action)] = (action, encoded)
        self._next_id = request_id = self._next_id + 1
        line = b'{"type":"outbound","requestId":"%d","action":%b}\n' % (request_id, cached[1])
        task = trio.lowlevel.current_task()
        self._pending[request_id] = task
        if self._burst or self._writing or self._queue or self._leftover:
            self._queue.append(line)
            self._wake_writer()
        else:
            self._write_now(sock, _frame(line))
        try:
            reply: Reply = await trio.lowlevel.wait_task_rescheduled(_abort)
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return reply

    def _write_now(self, sock: socket.socket, data: bytes) -> None:
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        if sent < len(data):  # the rest goes before anything queued after it
            self._leftover = data[sent:]
            self._wake_writer()

    def _wake_writer(self) -> None:
        writer = self._writer
        if writer is not None:
            self._writer = None
            trio.lowlevel.reschedule(writer)

    async def run(self) -> None:
        """Dial, upgrade, hello, read until the connection ends; again, at once, forever."""
        while True:
            try:
                await self._session()
            except* OSError:  # (ConnectionError among them) the connection ended
                pass
            await trio.lowlevel.checkpoint()  # a cancelled run ends here, not in a dial

    async def _session(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            try:
                sock.connect((self._host, self._port))
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
            await self._send_all(sock, _UPGRADE.format(path=self._path, host=self._host).encode())
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                buffer += await self._receive(sock)
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 101"):
                raise ConnectionError(f"upgrade refused: {head.splitlines()[0]!r}")
            self._sock = sock
            hello = json.dumps({"type": "hello", "platform": "relay", "botId": ""})
            await self._send_all(sock, _frame(hello.encode() + b"\n"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, sock)
                await self._read_loop(sock, buffer)
                nursery.cancel_scope.cancel()
        finally:
            self._sock = None
            if self._connected.is_set():
                self.drops += 1
                self._connected = trio.Event()
            # Every waiter is woken in this one loop, as the connection's end is seen:
            # what any Trio client must do at a reset, and nothing more.
            pending, self._pending = self._pending, {}
            for task in pending.values():
                trio.lowlevel.reschedule(task, Value(_ENDED))
            self._writer = None  # (the writer task ended with the nursery)
            self._queue.clear()
            self._leftover = b""
            self._burst = self._writing = False
            sock.close()

    async def _receive(self, sock: socket.socket) -> bytes:
        await trio.lowlevel.wait_readable(sock)
        data = sock.recv(_READ_SIZE)
        if not data:
            raise ConnectionError("the connector closed the connection")
        return data

    async def _send_all(self, sock: socket.socket, data: bytes) -> None:
        while data:
            await trio.lowlevel.wait_writable(sock)
            data = data[sock.send(data) :]

    async def _read_loop(self, sock: socket.socket, buffer: bytes) -> None:
        pending, reschedule = self._pending, trio.lowlevel.reschedule
        while True:
            start = 0
            settled = 0
            while len(buffer) - start >= 2:  # the server's frames are never masked
                length, header = buffer[start + 1] & 0x7F, 2
                if length == 126:
                    length, header = int.from_bytes(buffer[start + 2 : start + 4]), 4
                elif length == 127:
                    length, header = int.from_bytes(buffer[start + 2 : start + 10]), 10
                end = start + header + length
                if end > len(buffer):
                    break
                opcode = buffer[start] & 0x0F
                payload = buffer[start + header : end]
                start = end
                if opcode == 0x8:
                    return
                if opcode != 0x1:  # (the fast connector sends no pings, no fragments)
                    continue
                for line in payload.split(b"\n"):
                    if line.startswith(_RESULT):
                        request_id = int(line[_ID_AT : line.index(b'"', _ID_AT)])
                        task = pending.pop(request_id, None)
                        if task is not None:
                            reply = _SUCCEEDED if line.endswith(_SUCCESS) else _ENDED
                            reschedule(task, Value(reply))
                            settled += 1
                    elif not self._connected.is_set() and any(
                        marker in line for marker in _DESCRIPTORS
                    ):
                        self.connects += 1
                        self._connected.set()
            self._burst = settled > 1
            buffer = buffer[start:] + await self._receive(sock)

    async def _write_loop(self, sock: socket.socket) -> None:
        queue = self._queue
        while True:
            if not queue and not self._leftover:
                self._writer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(_abort)
            # Everyone woken with this frame's queuer adds theirs first: one write a burst.
            await trio.lowlevel.cancel_shielded_checkpoint()
            self._writing = True
            data, self._leftover = self._leftover, b""
            if queue:
                data += _frame(b"".join(queue))
                queue.clear()
            self._burst = False
            await self._send_all(sock, data)
            self._writing = False


class FloorBackend(TrioRelayBackend):
    """The floor client behind the benchmarks' backend interface."""

    name = NAME

    @asynccontextmanager
    async def client(
        self, url: str, overrides: Overrides, on_message: OnMessage | None = None
    ) -> AsyncIterator[Client]:
        if on_message is not None or overrides:
            raise ValueError("the Trio floor takes no options and handles no inbound")
        async with running(FloorClient(url)) as client:
            yield client

    def config(self, overrides: Overrides) -> dict[str, Any]:
        return {"client": NAME, "backoff": None, "keepalive": "none"}


FLOOR_BACKEND = FloorBackend()
