"""Structured logs: every record of the library carries its facts as attributes (the
``extra`` fields of the telemetry how-to) besides the message text, and never a secret."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from relay_support import bearer_tokens

import trio_relay
from trio_relay import MessageEvent, RelayConfig, UpgradeAuth
from trio_relay.testing import JsonObject, open_connector

GATEWAY, SECRET = "gw-logs", "logs-secret-do-not-leak"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def event(text: str, message_id: str) -> JsonObject:
    return {
        "text": text,
        "message_id": message_id,
        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"},
    }


@contextlib.contextmanager
def _captured() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("trio_relay")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    # The library's loggers; not the reference connector's (trio_relay.testing.*).
    return [r for r in caplog.records if r.name in ("trio_relay", "trio_relay.websocket")]


async def test_records_carry_the_relay_and_their_facts(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_relay")

    async def handle(message: MessageEvent) -> None:
        raise RuntimeError("always")

    async with open_connector(secrets={GATEWAY: SECRET}) as connector:
        async with trio_relay.open_relay(
            connector.url,
            auth=UpgradeAuth(GATEWAY, SECRET),
            on_message=handle,
            config=RelayConfig(close_timeout=0.2, max_delivery_attempts=2),
        ) as relay:
            await relay.wait_connected(5)
            buffer_id = connector.buffer_inbound(event("hi", "M1"), gateway_id=GATEWAY)
            while relay.stats.dead_letters < 1:
                await trio.sleep(0.1)
            await connector.close(1011, "internal error")
            await relay.wait_connected(30)
        tokens = [token for token in bearer_tokens(connector) if token]

    records = ours(caplog)
    assert records
    # Every record names its relay (the gateway id), whichever task logged it.
    assert {getattr(r, "relay", "missing") for r in records} == {GATEWAY}

    def having(text: str) -> logging.LogRecord:
        (record,) = [r for r in records if text in r.getMessage()]
        return record

    retry = having("retrying in")
    assert (retry.buffer_id, retry.cause) == (buffer_id, "RuntimeError")  # type: ignore[attr-defined]
    assert retry.next_attempt_s > 0  # type: ignore[attr-defined]
    gave_up = having("giving up")
    assert gave_up.buffer_id == buffer_id  # type: ignore[attr-defined]
    letter = having("dead letter")
    assert (letter.buffer_id, letter.cause) == (buffer_id, "attempts_exhausted")  # type: ignore[attr-defined]
    redial = having("next attempt in")
    assert redial.close_code == 1011  # type: ignore[attr-defined]
    assert redial.cause.startswith("closed by peer")  # type: ignore[attr-defined]
    assert redial.next_attempt_s > 0  # type: ignore[attr-defined]
    connected = [r for r in records if getattr(r, "state", None) == "connected"]
    assert len(connected) == 2 and all(r.cause for r in connected)  # type: ignore[attr-defined]
    assert any(getattr(r, "state", None) == "closed" for r in records)

    assert tokens
    for record in records:
        text = " ".join([record.getMessage(), *map(str, vars(record).values())])
        assert SECRET not in text
        assert all(token not in text for token in tokens)


def test_the_json_logging_example_prints_each_record_with_its_fields() -> None:
    # docs/how-to/telemetry.md includes this file.
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "json_logging.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and all(line["relay"] == "gateway-1" for line in lines)
    (redial,) = [line for line in lines if "next attempt in" in line["message"]]
    assert redial["close_code"] == 1011 and redial["next_attempt_s"] > 0
    assert [line["state"] for line in lines if "state" in line] == [
        "connected", "reconnecting", "connected", "closed"
    ]
    assert "s3cret" not in done.stdout


async def test_a_refused_dial_logs_its_errno(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    # A loopback port nothing listens on: bound, never listening, so it stays ours.
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
        async with trio_relay.open_relay(f"ws://127.0.0.1:{port}/ws") as relay:
            while relay.stats.dial_failures < 2:
                await trio.sleep(0.05)
    redials = [r for r in ours(caplog) if "next attempt in" in r.getMessage()]
    assert redials
    assert {getattr(r, "errno", None) for r in redials} == {errno.ECONNREFUSED}
    assert all(r.cause.startswith("connect failed") for r in redials)  # type: ignore[attr-defined]


def test_a_rejected_result_names_its_request() -> None:
    from trio_relay._core.protocol import RelayProtocol, Request
    from trio_relay._core.stats import RelayStats

    protocol = RelayProtocol(RelayStats())
    protocol.add(Request("r-41", b"line\n", 30.0, 30.0), 0.0)  # pending: not yet written
    with _captured() as records:
        protocol.receive(b'{"type": "outbound_result", "requestId": "r-41", "result": {}}\n')
    (record,) = records
    assert record.request_id == "r-41"  # type: ignore[attr-defined]
    assert record.cause == "a result for a request not yet sent"  # type: ignore[attr-defined]
