"""``pytest tests/core`` opens no socket: the core is sans-I/O, and so are its tests.

An audit hook (the interpreter's own, public seam for watching socket creation) turns any
socket made while a core test runs into a failure naming the test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

_running: list[str] = []


def _no_sockets(event: str, args: tuple[object, ...]) -> None:
    if _running and event in ("socket.__new__", "socket.socketpair"):
        raise RuntimeError(f"{_running[-1]} opened a socket; tests/core must stay sans-I/O")


sys.addaudithook(_no_sockets)


@pytest.fixture(autouse=True)
def _forbid_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    _running.append(request.node.nodeid)
    try:
        yield
    finally:
        _running.pop()
