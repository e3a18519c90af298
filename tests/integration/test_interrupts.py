"""Ctrl-C, for real: every entry point gets SIGINT the way a terminal sends it (to the
whole process group) once it is at work, and must end with one line and status 130
(the commands), or with the ``KeyboardInterrupt`` itself (the library).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import IO

import pytest

CLI = [sys.executable, "-m", "trio_relay.cli"]
INTERRUPTED = 130


def interrupt(
    argv: list[str], ready: Callable[[subprocess.Popen[str]], object]
) -> tuple[int, str, str]:
    """Start ``argv`` in a session of its own, wait until ``ready(process)`` returns,
    send SIGINT to its process group; its exit status, stdout and stderr."""
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        ready(process)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return process.returncode, out, err


def first_line_of(stream: str) -> Callable[[subprocess.Popen[str]], str]:
    def ready(process: subprocess.Popen[str]) -> str:
        pipe: IO[str] | None = getattr(process, stream)
        assert pipe is not None
        line = pipe.readline()
        assert line, f"the process ended before writing to {stream}"
        return line

    return ready


def line_containing(stream: str, needle: str) -> Callable[[subprocess.Popen[str]], str]:
    def ready(process: subprocess.Popen[str]) -> str:
        while needle not in (line := first_line_of(stream)(process)):
            pass
        return line

    return ready


def assert_one_line(err: str, command: str) -> None:
    assert err == f"trio-relay {command}: interrupted\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["connector"],
        ["connector", "--no-auth", "--quiet"],
        ["connector", "--script", os.devnull, "--timeout", "600"],  # waiting for a gateway
    ],
)
def test_connector(argv: list[str]) -> None:
    code, _, err = interrupt([*CLI, *argv], line_containing("stdout", "serving"))
    assert code == INTERRUPTED
    assert_one_line(err, "connector")


def test_probe_while_the_dial_hangs() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(60)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        accepted: list[socket.socket] = []

        def dialled(process: subprocess.Popen[str]) -> None:
            # The probe is inside its dial: connected, waiting for an upgrade answer
            # that never comes.
            accepted.append(listener.accept()[0])

        try:
            code, out, err = interrupt([*CLI, "probe", url, "--timeout", "600"], dialled)
        finally:
            for conn in accepted:
                conn.close()
    assert code == INTERRUPTED
    assert out == ""
    assert_one_line(err, "probe")


def test_bench() -> None:
    code, _, err = interrupt([*CLI, "bench", "redial", "--tiny"], first_line_of("stdout"))
    assert code == INTERRUPTED
    assert_one_line(err, "bench")


def test_soak() -> None:
    # Its library logs on stderr tell when the relay is at work.
    argv = [*CLI, "soak", "--seconds", "600", "--log-level", "INFO"]
    # Interrupted once every actor is at work (a handler failing on purpose means the
    # deliveries run): raised in the middle of an actor's step, Ctrl-C used to be lost
    # there and the soak ran on (about 1 in 5), until the soak ran Trio with Ctrl-C
    # restricted to the main task's checkpoints.
    code, _, err = interrupt(argv, line_containing("stderr", "handler failed"))
    assert code == INTERRUPTED
    assert err.endswith("\ntrio-relay soak: interrupted\n")
    assert "KeyboardInterrupt" not in err and "BaseExceptionGroup" not in err


LIBRARY = textwrap.dedent(
    """
    import functools, sys, trio
    from trio_relay.testing import open_connector, serve_connector

    async def in_the_block():
        async with open_connector(port={port}):
            await trio.sleep_forever()

    served = functools.partial(serve_connector, port={port})

    try:
        trio.run({main})
    except BaseException as exc:
        print(type(exc).__name__, flush=True)
    """
)


def listening(port: int) -> Callable[[subprocess.Popen[str]], None]:
    def ready(process: subprocess.Popen[str]) -> None:
        while process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)  # not listening yet
        raise AssertionError("the connector ended before listening")

    return ready


@pytest.mark.parametrize("main", ["in_the_block", "served"])
def test_library_entry_points_raise_the_interrupt_itself(main: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = LIBRARY.format(main=main, port=port)
    code, out, err = interrupt([sys.executable, "-c", script], listening(port))
    assert (code, out, err) == (0, "KeyboardInterrupt\n", "")
