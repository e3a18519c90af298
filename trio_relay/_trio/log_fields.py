"""The ``relay`` field of every log record of the library (structured logging).

Each record of the ``trio_relay`` loggers carries, besides its message, its facts as
attributes (``logging``'s ``extra``): ``relay`` always, and ``request_id``,
``buffer_id``, ``close_code``, ``cause``, ``errno``, ``next_attempt_s`` where they
apply (see the telemetry how-to). The call sites give the facts they hold; ``relay``
comes from here: the relay's own tasks (the supervisor, the connection's tasks, the
inbound pipeline and the handlers it runs) set `RELAY_NAME` as they start, and a
filter on the library's loggers copies it onto every record that does not name its
relay itself. A record logged outside a relay's tasks without ``extra={"relay": ...}``
gets ``relay=None``.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

__all__ = ["LOGGER_NAMES", "RELAY_NAME"]

RELAY_NAME: ContextVar[str | None] = ContextVar("trio_relay.relay", default=None)
"""The relay whose task is running: its gateway id, else its URL's host. Trio tasks
inherit a copy of their spawner's context, so one ``set`` at the top of a relay's
long-lived tasks names every task they start."""

LOGGER_NAMES = ("trio_relay", "trio_relay.websocket")
"""The library's loggers (a logger's filters see only its own records, not its
children's, so each has the filter)."""


class _RelayField(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "relay"):
            record.relay = RELAY_NAME.get()
        return True


_FILTER = _RelayField()

for _name in LOGGER_NAMES:
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _RelayField) for f in _logger.filters):
        _logger.addFilter(_FILTER)
