"""How the soak watches the relay without touching it: ERROR records counted, and the
bytes the client hands to its socket read back for the nonces they carry."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import trio_websocket

__all__ = ["ErrorLog", "errors_visible", "tap_client_writes"]


class ErrorLog(logging.Handler):
    """Counts records at ERROR and above (and keeps the first few)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.count = 0
        self.first: list[str] = []
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < 5:
            text = f"{record.name}: {record.getMessage()}"
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({record.exc_info[1]!r})"
            self.first.append(text[:300])
            self.tracebacks.append(logging.Formatter().format(record))


@contextlib.contextmanager
def errors_visible() -> Iterator[None]:
    """Make sure the relay's and the connector's ERROR records are created for the run
    (a caller may have silenced them, e.g. ``trio-relay bench``), so that the "nothing
    logged at ERROR" verdict is never blind. Levels are restored afterwards."""
    saved = []
    for name in ("trio_relay", "trio_relay.testing.connector"):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        if logger.getEffectiveLevel() > logging.ERROR:
            logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


@contextlib.contextmanager
def tap_client_writes(on_send: Callable[[str | bytes, bool], None]) -> Iterator[None]:
    """Call ``on_send(message, False)`` when a *client-side* ``send_message`` is called,
    and ``on_send(message, True)`` once it returned."""
    cls = trio_websocket.WebSocketConnection
    original = cls.send_message

    async def send_message(self: Any, message: str | bytes) -> None:
        if self.is_client:
            on_send(message, False)
        await original(self, message)
        if self.is_client:
            on_send(message, True)

    cls.send_message = send_message  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.send_message = original  # type: ignore[method-assign]
