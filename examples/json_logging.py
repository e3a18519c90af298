"""Structured logs of a relay: one JSON object per record, its facts as fields.

Every record of the ``trio_relay`` loggers carries ``relay`` (the gateway id, else the
URL's host) and, where they apply, ``request_id``, ``buffer_id``, ``close_code``,
``cause``, ``errno``, ``next_attempt_s`` and ``state`` as attributes: a formatter picks
them up without parsing the message text.

Run it: ``python examples/json_logging.py`` (a connector restart, as JSON lines).
"""

import json
import logging
import sys

import trio

import trio_relay
from trio_relay.testing import open_connector

FIELDS = (
    "relay",
    "request_id",
    "buffer_id",
    "close_code",
    "cause",
    "errno",
    "next_attempt_s",
    "state",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        return json.dumps(line)


async def main() -> None:
    auth = trio_relay.UpgradeAuth("gateway-1", "s3cret")
    async with (
        open_connector(secrets={"gateway-1": "s3cret"}) as connector,
        trio_relay.open_relay(connector.url, auth=auth) as relay,
    ):
        await relay.wait_connected(timeout=5)
        await connector.close(1011, "restarting")  # the relay logs the drop and redials
        await relay.wait_connected(timeout=5)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    logging.getLogger("trio_relay").addHandler(handler)
    logging.getLogger("trio_relay").setLevel(logging.INFO)
    logging.getLogger("trio_relay.testing").setLevel(logging.WARNING)  # the connector's own
    trio.run(main)
