"""How the soak watches the relay without touching it: ERROR records counted. (What the
client hands to its socket is read back by ``trio_relay.testing.FaultDialer(tap=...)``,
the relay's dialer during the soak.)"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["ErrorLog", "errors_visible"]


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
