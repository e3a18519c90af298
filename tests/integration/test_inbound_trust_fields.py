"""Trust fields end to end (docs/protocol.md, "Trust fields"): the reference connector
sends them, the handler reads them on ``event.source``; a value that is not a JSON
boolean reaches the handler as ``None`` (unknown: fail closed), is counted in
``stats.trust_fields_rejected`` and logged, and the message is still delivered."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from trio_relay import MessageEvent, open_relay
from trio_relay.testing import open_connector


async def test_the_connector_sends_trust_fields_and_the_handler_reads_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    got: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        got.append(event)

    async with open_connector() as connector, open_relay(
        connector.url, on_message=on_message
    ) as relay:
        await relay.wait_connected(5)
        connector.say("C1", "from a bot", is_bot=True, one_to_one_verified=False)
        connector.say("C1", "an edit", is_bot=False, message_is_edit=True)
        connector.say("C1", "an old connector")  # sends none of them
        with trio.fail_after(5):
            await connector.wait_acks(3)
    trust = [
        (e.text, e.source.is_bot, e.source.message_is_edit, e.source.one_to_one_verified)
        for e in got
    ]
    assert trust == [
        ("from a bot", True, None, False),
        ("an edit", False, True, None),  # not carried over from the chat's last event
        ("an old connector", None, None, None),
    ]
    assert relay.stats.trust_fields_rejected == 0


async def test_a_trust_field_that_is_not_a_boolean_is_unknown_counted_and_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        got.append(event)

    source = {
        "platform": "relay",
        "chat_id": "C1",
        "user_id": "U1",
        "is_bot": "false",  # a string: truthy, and not what it says
        "message_is_edit": 0,
        "one_to_one_verified": True,
    }
    async with open_connector() as connector, open_relay(
        connector.url, on_message=on_message
    ) as relay:
        await relay.wait_connected(5)
        with caplog.at_level(logging.WARNING, logger="trio_relay"):
            connector.buffer_inbound({"text": "hi", "message_id": "m1", "source": source})
            with trio.fail_after(5):
                await connector.wait_acks(1)
    assert [e.text for e in got] == ["hi"]  # delivered: bad input, not a bad message
    assert (got[0].source.is_bot, got[0].source.message_is_edit) == (None, None)
    assert got[0].source.one_to_one_verified is True
    assert relay.stats.trust_fields_rejected == 2
    assert relay.stats.frames_rejected == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "is_bot, message_is_edit not a JSON boolean" in w and "read as None" in w
        for w in warnings
    ), warnings
