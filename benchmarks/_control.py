"""Starting the connector process, and talking to it from either event loop.

:class:`ConnectorProcess` is synchronous: it lives across many rounds, each of which runs
in a fresh ``trio.run`` or ``asyncio.run``. Inside a round, :class:`TrioControl` or
:class:`AsyncioControl` sends one JSON command per line over the process's Unix socket
and returns its JSON answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import subprocess
import tempfile
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import trio

from . import module_argv

__all__ = ["AsyncioControl", "ConnectorError", "ConnectorProcess", "TrioControl"]


class ConnectorError(RuntimeError):
    """The connector process failed to start, died, or refused a command."""


class ConnectorProcess:
    """``python -m trio_relay_benchmarks.connector_proc`` as a context manager.

    ``prefix`` runs it under another command (``ip netns exec NS`` for the kernel path);
    ``cpu`` pins it to one CPU so that it never competes with the client under test;
    ``module`` picks another connector speaking the same control protocol (the
    throughput benchmark's :mod:`.fast_connector`).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        cpu: int | None = None,
        prefix: Sequence[str] = (),
        start_timeout: float = 30.0,
        module: str = "trio_relay_benchmarks.connector_proc",
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="trio-relay-bench-")
        self.control_path = os.path.join(self._tmp.name, "control.sock")
        self._log = open(os.path.join(self._tmp.name, "connector.log"), "w+b")  # noqa: SIM115
        argv = [*prefix, *module_argv(module)]
        argv += ["--control", self.control_path, "--host", host]
        if cpu is not None:
            argv += ["--cpu", str(cpu)]
        self.argv = argv
        # Our end of its stdin stays open until close(): if this process dies, the
        # connector sees EOF and exits instead of lingering.
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log
        )
        try:
            ready = self._readline(start_timeout)
            info = json.loads(ready)
        except BaseException:
            self.close()
            raise
        self.url: str = info["url"]
        self.pid: int = info["pid"]
        self.loop: str = info.get("loop", "trio")
        """The connector's event loop (``trio``, ``uvloop`` or ``asyncio``)."""

    def _readline(self, timeout: float) -> str:
        stdout = self._proc.stdout
        assert stdout is not None
        readable, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline().decode() if readable else ""
        if not line:
            self._proc.kill()
            self._proc.wait()
            raise ConnectorError(
                f"the connector process did not start within {timeout:g} s "
                f"(exit {self._proc.returncode}):\n{self.log_tail()}"
            )
        return line

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        self._log.seek(0)
        text = self._log.read().decode(errors="replace")
        return text[-chars:]

    def check_alive(self) -> None:
        if self._proc.poll() is not None:
            raise ConnectorError(
                f"the connector process died (exit {self._proc.returncode}):\n{self.log_tail()}"
            )

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._log.close()
        self._tmp.cleanup()

    def __enter__(self) -> ConnectorProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _encode(cmd: str, args: dict[str, Any]) -> bytes:
    return json.dumps({"cmd": cmd, **args}).encode() + b"\n"


def _decode(line: bytes, cmd: str) -> dict[str, Any]:
    if not line:
        raise ConnectorError(f"the connector process hung up during {cmd!r}")
    reply: dict[str, Any] = json.loads(line)
    if not reply.pop("ok", False):
        raise ConnectorError(str(reply.get("error", f"{cmd} failed")))
    return reply


class TrioControl:
    """Commands to the connector from inside ``trio.run``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._buffer = b""
        self._lock = trio.Lock()

    @classmethod
    async def connect(cls, path: str) -> TrioControl:
        return cls(await trio.open_unix_socket(path))

    async def call(self, cmd: str, **args: Any) -> dict[str, Any]:
        async with self._lock:
            await self._stream.send_all(_encode(cmd, args))
            while b"\n" not in self._buffer:
                data = await self._stream.receive_some(1 << 16)
                if not data:
                    break
                self._buffer += data
            line, _, self._buffer = self._buffer.partition(b"\n")
        return _decode(line, cmd)

    async def aclose(self) -> None:
        await self._stream.aclose()


class AsyncioControl:
    """Commands to the connector from inside ``asyncio.run``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, path: str) -> AsyncioControl:
        reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
        return cls(reader, writer)

    async def call(self, cmd: str, **args: Any) -> dict[str, Any]:
        async with self._lock:
            self._writer.write(_encode(cmd, args))
            await self._writer.drain()
            line = await self._reader.readline()
        return _decode(line, cmd)

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
