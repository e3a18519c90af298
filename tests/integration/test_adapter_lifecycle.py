"""Handlers that take the relay, and going idle before our own close, against the
reference connector (docs/protocol.md, "Going idle")."""

from __future__ import annotations

from typing import Any

import trio

from trio_relay import MessageEvent, PassthroughForward, Relay, RelayConfig, open_relay
from trio_relay._core.frames import GoingIdle
from trio_relay.testing import open_connector


async def test_handlers_may_take_the_relay() -> None:
    calls: list[tuple[str, Any]] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        calls.append(("message", relay))
        await relay.send_text(event.source.chat_id or "", f"echo {event.text}")

    async def on_interrupt(session_key: str, chat_id: str, relay: Relay) -> None:
        calls.append(("interrupt", relay))

    async def on_passthrough(forward: PassthroughForward) -> None:  # the plain form
        calls.append(("passthrough", forward.path))

    async with (
        open_connector() as connector,
        open_relay(
            connector.url,
            on_message=on_message,
            on_interrupt=on_interrupt,
            on_passthrough=on_passthrough,
        ) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "hi")
        connector.buffer_passthrough({"platform": "relay", "path": "/hook", "bodyB64": ""})
        await connector.send_interrupt("S1", "C1")
        with trio.fail_after(5):
            await connector.wait_until(lambda: len(connector.outbound) >= 1)
            while len(calls) < 3:
                await trio.sleep(0.01)
    assert sorted(calls, key=lambda c: c[0]) == [
        ("interrupt", relay),
        ("message", relay),
        ("passthrough", "/hook"),
    ]
    assert connector.outbound[0].action["content"] == "echo hi"


async def test_leaving_the_block_goes_idle_first() -> None:
    async with open_connector() as connector:
        async with open_relay(connector.url) as relay:
            await relay.wait_connected(5)
            session = connector.current
        assert session is not None
        with trio.fail_after(5):
            await session.closed.wait()
    assert session.idle  # the connector switched us to buffered-only before the close
    assert session.close_code == 1000
    assert [type(f) for f in connector.received].count(GoingIdle) == 1


async def test_going_idle_on_close_can_be_turned_off() -> None:
    async with open_connector() as connector:
        async with open_relay(connector.url, config=RelayConfig(go_idle_on_close=False)) as relay:
            await relay.wait_connected(5)
            session = connector.current
        assert session is not None
        with trio.fail_after(5):
            await session.closed.wait()
    assert not session.idle
    assert not any(isinstance(f, GoingIdle) for f in connector.received)
