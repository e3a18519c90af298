"""The benchmarks' connector: the reference connector in a process of its own.

Both implementations are measured against this one process, so it must not share a core
or an event loop with the client under test. The parent starts it with::

    python -m trio_relay_benchmarks.connector_proc --control PATH [--host H] [--cpu N]

It prints one JSON line on stdout once it listens (``{"url": ..., "pid": ...}``), exits
when its stdin closes (so it never outlives the parent), and is steered over the Unix
socket ``PATH`` (a path-based Unix socket, so it also reaches
a connector running in another network namespace): one JSON object per line in, one per
line out. Every fault command answers with the ``time.monotonic()`` of the fault, which
on Linux is one clock for every process, so the client can subtract it from its own.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import trio

from trio_relay.testing import ReferenceConnector, Session, open_connector

from . import _connector_args

Reply = dict[str, Any]
Command = Callable[[ReferenceConnector, dict[str, Any]], Awaitable[Reply]]

_COMMANDS: dict[str, Command] = {}


def _command(name: str) -> Callable[[Command], Command]:
    def register(fn: Command) -> Command:
        _COMMANDS[name] = fn
        return fn

    return register


class _Timeline:
    """With ``trace`` on: the ``time.monotonic()`` of each session opening (upgrade
    accepted), each frame in or out, by type, for :mod:`.redial_steps`. Off by default,
    so the other benchmarks' connector does nothing more per frame than one test."""

    def __init__(self) -> None:
        self.on = False
        self.events: collections.deque[tuple[float, int, str]] = collections.deque(maxlen=4096)

    def session(self, session: Session, event: Literal["open", "closed"]) -> None:
        if self.on:
            self.events.append((time.monotonic(), session.index, f"session {event}"))

    def frame(self, session: Session, direction: Literal["in", "out"], frame: Any) -> None:
        if self.on:
            self.events.append((time.monotonic(), session.index, f"{direction} {frame.TYPE}"))


_TIMELINE = _Timeline()


@_command("trace")
async def _trace(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """``on``: record the timeline from now (cleared); off: stop recording."""
    _TIMELINE.on = bool(args.get("on", True))
    _TIMELINE.events.clear()
    return {"t": time.monotonic()}


@_command("timeline")
async def _timeline(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """Every event recorded since ``since`` (a ``time.monotonic()``), oldest first."""
    since = float(args.get("since", 0.0))
    return {"events": [list(e) for e in _TIMELINE.events if e[0] >= since]}


@_command("ping")
async def _ping(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    return {"t": time.monotonic()}


@_command("cpu")
async def _cpu(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """CPU seconds this process has used (to tell who is the bottleneck)."""
    return {"cpu": time.process_time()}


@_command("abort")
async def _abort(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    await connector.abort()
    return {"t": connector.kills[-1]}


@_command("close")
async def _close(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    await connector.close(int(args["code"]), str(args.get("reason", "")))
    return {"t": connector.kills[-1]}


@_command("silent")
async def _silent(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    connector.go_silent()
    return {"t": connector.kills[-1]}


@_command("silent_close")
async def _silent_close(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """Fall silent for ``silence`` seconds, then close with ``code``."""
    session = connector.current
    connector.go_silent(session)
    t_silent = connector.kills[-1]
    await trio.sleep(float(args["silence"]))
    await connector.close(int(args["code"]), str(args.get("reason", "")), session=session)
    return {"t_silent": t_silent, "t": connector.kills[-1]}


@_command("reap_silent")
async def _reap_silent(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """Reset every session left silent (its gateway gave up on it long ago)."""
    silent = [s for s in connector.sessions if s.silent and not s.closed.is_set()]
    for session in silent:
        session.abort()
    return {"n": len(silent)}


@_command("withhold")
async def _withhold(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    connector.withhold_results()
    return {}


@_command("release")
async def _release(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    connector.release_results()
    return {}


@_command("outbound_count")
async def _outbound_count(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    return {"n": connector.outbound_count}


@_command("wait_outbound")
async def _wait_outbound(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    with trio.fail_after(float(args.get("timeout", 30))):
        await connector.wait_outbound(int(args["n"]))
    return {"n": connector.outbound_count}


@_command("wait_session")
async def _wait_session(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    with trio.fail_after(float(args.get("timeout", 30))):
        await connector.wait_session(int(args["n"]))
    return {"handshakes": connector.handshakes}


@_command("sessions")
async def _sessions(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    live = sum(1 for s in connector.sessions if s.is_open)
    return {"handshakes": connector.handshakes, "open": live}


@_command("restart")
async def _restart(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """Stop (resetting every session), stay down ``down`` seconds, listen again."""
    await connector.stop(abort=True)
    t_kill = connector.kills[-1]
    await trio.sleep(max(0.0, float(args["down"]) - (time.monotonic() - t_kill)))
    await connector.start()
    return {"t_kill": t_kill, "t_up": time.monotonic()}


@_command("inbound")
async def _inbound(connector: ReferenceConnector, args: dict[str, Any]) -> Reply:
    """Deliver ``n`` buffered events with at most ``window`` unacknowledged at a time (a
    connector's flow-control window; more would overrun the gateway's bounded queue)
    and time the lot, from the first buffered event to the last ack."""
    n, window, chats = int(args["n"]), int(args["window"]), int(args.get("chats", 16))
    acks0 = len(connector.acks)
    sent = 0
    t0 = time.monotonic()
    with trio.fail_after(float(args.get("timeout", 60))):
        while sent < n:
            outstanding = sent - (len(connector.acks) - acks0)
            if outstanding >= window:
                resume_below = acks0 + sent - window // 2
                await connector.wait_until(_acks_above(connector, resume_below))
                continue
            for _ in range(min(window - outstanding, n - sent)):
                connector.buffer_inbound(_event(sent, chats))
                sent += 1
            await trio.lowlevel.checkpoint()
        await connector.wait_acks(acks0 + n)
    return {"t0": t0, "t1": time.monotonic(), "n": n}


def _acks_above(connector: ReferenceConnector, floor: int) -> Callable[[], bool]:
    return lambda: len(connector.acks) > floor


def _event(i: int, chats: int) -> dict[str, Any]:
    return {
        "text": f"message {i}",
        "message_type": "text",
        "message_id": f"bench-{i}",
        "source": {"platform": "relay", "chat_id": f"C{i % chats}", "user_id": "U1"},
    }


async def _serve_control(connector: ReferenceConnector, stream: trio.SocketStream) -> None:
    buffer = b""
    async with stream:
        while True:
            data = await stream.receive_some(1 << 16)
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                reply = await _execute(connector, json.loads(line))
                await stream.send_all(json.dumps(reply).encode() + b"\n")
                if reply.get("quit"):
                    raise _Quit


async def _execute(connector: ReferenceConnector, request: dict[str, Any]) -> Reply:
    name = str(request.pop("cmd", ""))
    if name == "quit":
        return {"ok": True, "quit": True}
    command = _COMMANDS.get(name)
    if command is None:
        return {"ok": False, "error": f"unknown command {name!r}"}
    try:
        reply = await command(connector, request)
    except Exception as exc:  # a failed command is an answer, not the server's end
        return {"ok": False, "error": f"{name}: {type(exc).__name__}: {exc}"}
    reply["ok"] = True
    return reply


class _Quit(Exception):
    pass


async def _main(host: str, port: int, control_path: str) -> None:
    async with open_connector(
        host=host, port=port, record=False, on_session=_TIMELINE.session,
        on_frame=_TIMELINE.frame,
    ) as connector:  # fmt: skip
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(control_path)
        sock.listen(16)
        listener = trio.SocketListener(sock)
        print(json.dumps({"url": connector.url, "pid": os.getpid()}), flush=True)

        async def serve(stream: trio.SocketStream) -> None:
            try:
                await _serve_control(connector, stream)
            except _Quit:
                nursery.cancel_scope.cancel()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the parent's round ended; its next round connects again

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, serve, [listener])
            nursery.start_soon(_exit_with_parent, nursery.cancel_scope)


async def _exit_with_parent(scope: trio.CancelScope) -> None:
    """The parent holds our stdin open; EOF means it is gone (even if it was killed
    without a chance to stop us), so stop too rather than linger as an orphan."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    async with stdin:
        while await stdin.receive_some(1024):
            pass
    scope.cancel()


def main(argv: list[str] | None = None) -> None:
    args = _connector_args.parse("python -m trio_relay_benchmarks.connector_proc", argv)
    _connector_args.freeze_imports()
    try:
        trio.run(_main, args.host, args.port, args.control)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
