"""A connector for the throughput benchmark that is never the bottleneck.

The reference connector (``trio_relay.testing``) is built to be *checked*: it validates
every frame, records sessions and injects faults, on trio-websocket and wsproto's
pure-Python masking. Against it a fast client measures the connector. This one only
answers, as cheaply as this machine allows:

- asyncio callbacks (an ``asyncio.Protocol``, no coroutine per message) on uvloop when it
  is installed (``pip install uvloop``; the stdlib loop otherwise, and the report says so);
- the sans-I/O ``ServerProtocol`` of ``websockets`` (its C speedups unmask frames);
- **batched replies**: every ``outbound`` decoded from one read of the socket is answered
  in one WebSocket message, written with one ``transport.write``.

Per ``hello`` it sends a descriptor, per ``outbound`` an ``outbound_result``
(``{"success": true}``), per ``going_idle`` a ``going_idle_ack``; everything else is
ignored.

**Lockstep** (``bench cost``, ``cost.py``): a connection upgraded on a path under
``/cost/`` answers in batches of a fixed size rather than per read, so the client under
count sees the same messages whatever the two processes' timing: an ``outbound`` whose
``action.chat_id`` is ``cost:batch=K`` is answered at once and makes every later batch
``K`` results in one message, written once the ``K``-th request arrived (1 until then);
one whose chat is ``cost:reset`` is answered by a TCP reset (SO_LINGER 0).

It runs in a process of its own, started like the reference one::

    python -m trio_relay_benchmarks.fast_connector --control PATH [--host H] [--cpu N]

and prints the same ``{"url": ..., "pid": ...}`` line, exits when its stdin closes, and
answers ``ping``, ``cpu``, ``sessions`` and ``quit`` on its control socket (see
:mod:`.connector_proc` for the reference connector's full command set).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import sys
import time
from typing import Any, cast

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol

from . import _connector_args

__all__ = ["loop_name", "main"]

_DESCRIPTOR_FIELDS: dict[str, Any] = {
    "contract_version": 1,
    "max_message_length": 4096,
    "supports_draft_streaming": False,
    "supports_edit": True,
    "supports_threads": False,
    "markdown_dialect": "plain",
    "len_unit": "chars",
}
_SUCCESS = ',"result":{"success":true}}\n'
LOCKSTEP_PATH = "/cost/"
"""Upgrade paths under this one get the lockstep answers (module docstring)."""
BATCH_COMMAND = "cost:batch="
RESET_COMMAND = "cost:reset"


def _descriptor_line(platform: str) -> str:
    descriptor = {"platform": platform, "label": platform.title(), **_DESCRIPTOR_FIELDS}
    return json.dumps({"type": "descriptor", "descriptor": descriptor}) + "\n"


class Stats:
    def __init__(self) -> None:
        self.sessions = 0
        self.open = 0
        self.outbound = 0


class _Session(asyncio.Protocol):
    """One WebSocket connection, driven by the loop's callbacks."""

    def __init__(self, stats: Stats) -> None:
        self._stats = stats
        self._ws = ServerProtocol(max_size=None)
        self._transport: asyncio.Transport | None = None
        self._upgraded = False
        self._fragments: list[bytes | bytearray | memoryview] = []
        self._partial = ""
        self._lockstep = False
        self._batch = 1
        self._held: list[str] = []
        """Lockstep: results written once the batch is full."""
        self._reset = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._upgraded:
            self._stats.open -= 1
        self._transport = None

    def data_received(self, data: bytes) -> None:
        ws = self._ws
        ws.receive_data(data)
        replies: list[str] = []
        for event in ws.events_received():
            if isinstance(event, Request):
                ws.send_response(ws.accept(event))
                self._lockstep = event.path.startswith(LOCKSTEP_PATH)
                self._upgraded = True
                self._stats.sessions += 1
                self._stats.open += 1
            elif isinstance(event, Frame):
                self._frame(event, replies)
        if replies:
            ws.send_text("".join(replies).encode())
        if self._reset:
            self._abort()
            return
        self._flush()

    def eof_received(self) -> bool | None:
        self._ws.receive_eof()
        self._flush()
        return None

    def _frame(self, frame: Frame, replies: list[str]) -> None:
        if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            self._fragments.append(frame.data)
            if frame.fin:
                payload = b"".join(self._fragments)
                self._fragments.clear()
                self._lines(payload.decode("utf-8", "replace"), replies)

    def _lines(self, text: str, replies: list[str]) -> None:
        *lines, self._partial = (self._partial + text).split("\n")
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
            if kind == "outbound":
                self._stats.outbound += 1
                request_id = json.dumps(str(frame.get("requestId")))
                reply = '{"type":"outbound_result","requestId":' + request_id + _SUCCESS
                if self._lockstep:
                    self._step(frame, reply, replies)
                else:
                    replies.append(reply)
            elif kind == "hello":
                replies.append(_descriptor_line(str(frame.get("platform", ""))))
            elif kind == "going_idle":
                replies.append('{"type":"going_idle_ack"}\n')

    def _step(self, frame: dict[str, Any], reply: str, replies: list[str]) -> None:
        action = frame.get("action")
        chat = action.get("chat_id") if isinstance(action, dict) else None
        if isinstance(chat, str) and chat.startswith("cost:"):
            if chat == RESET_COMMAND:
                self._reset = True
            elif chat.startswith(BATCH_COMMAND):
                self._batch = max(1, int(chat.removeprefix(BATCH_COMMAND)))
                replies.append(reply)
            return
        self._held.append(reply)
        if len(self._held) >= self._batch:
            replies.extend(self._held)
            self._held.clear()

    def _abort(self) -> None:
        transport = self._transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def _flush(self) -> None:
        transport = self._transport
        if transport is None:
            return
        out = self._ws.data_to_send()
        if out:
            transport.write(b"".join(out))
        if self._ws.close_expected():
            transport.close()


async def _serve_control(stats: Stats, path: str, stop: asyncio.Event) -> asyncio.Server:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                request = json.loads(line)
                cmd = request.get("cmd")
                reply: dict[str, Any] = {"ok": True}
                if cmd == "ping":
                    reply["t"] = time.monotonic()
                elif cmd == "cpu":
                    reply["cpu"] = time.process_time()
                elif cmd == "sessions":
                    reply.update(handshakes=stats.sessions, open=stats.open)
                elif cmd == "outbound_count":
                    reply["n"] = stats.outbound
                elif cmd == "quit":
                    reply["quit"] = True
                    stop.set()
                else:
                    reply = {"ok": False, "error": f"unknown command {cmd!r} (fast connector)"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    return await asyncio.start_unix_server(client, path)


def loop_name() -> str:
    """``uvloop`` when it is installed, else ``asyncio``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


async def _main(host: str, port: int, control_path: str) -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    stop = asyncio.Event()
    server = await loop.create_server(lambda: _Session(stats), host, port)
    control = await _serve_control(stats, control_path, stop)
    bound = server.sockets[0].getsockname()
    print(
        json.dumps({"url": f"http://{host}:{bound[1]}", "pid": os.getpid(), "loop": loop_name()}),
        flush=True,
    )
    def parent_gone() -> None:
        # The parent holds our stdin open; EOF means it is gone.
        if not os.read(0, 1024):
            stop.set()

    loop.add_reader(0, parent_gone)
    try:
        await stop.wait()
    finally:
        loop.remove_reader(0)
        control.close()
        server.close()


def main(argv: list[str] | None = None) -> None:
    args = _connector_args.parse("python -m trio_relay_benchmarks.fast_connector", argv)
    _connector_args.freeze_imports()
    coro = _main(args.host, args.port, args.control)
    try:
        if loop_name() == "uvloop":
            import uvloop

            uvloop.run(coro)
        else:
            asyncio.run(coro)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
