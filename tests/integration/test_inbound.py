"""Inbound delivery end to end: the real client against the reference connector over
loopback (real sockets, real WebSocket framing, the connector's real replay buffer).

Real clock: the sockets are real. Backoff is shortened so reconnects take milliseconds,
and every test runs under a deadline so a broken rule fails instead of hanging.
Ordering and concurrency: ``test_inbound_ordering.py``.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from inbound_relay_support import DEADLINE, Handled, event, eventually, reconnect, relay_to

from trio_relay import DeadLetter, MessageEvent, PassthroughForward
from trio_relay.testing import ReferenceConnector, open_connector

FORWARD = {
    "platform": "slack", "botId": "B1", "method": "POST", "path": "/slack/actions",
    "headers": [["Content-Type", "application/x-www-form-urlencoded"]],
    "bodyB64": base64.b64encode(b"payload=%7B%7D").decode(),
}


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector() as c:
        yield c


# --- at-least-once, handled once ------------------------------------------------------


async def test_replay_after_reconnect_is_handled_once_and_acked(
    connector: ReferenceConnector,
) -> None:
    # The handler finishes while the relay is between connections, so its ack cannot
    # be sent; the connector replays on the next handshake and dedupe must drop *and
    # ack* it, or the connector replays it forever.
    handled = Handled()
    handled.gate = trio.Event()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled) as relay:
            bid = connector.buffer_inbound(event())
            await handled.started.wait()
            sessions = connector.handshakes
            await connector.stop()  # listener down: the relay cannot redial yet
            handled.gate.set()
            await eventually(lambda: relay.stats.delivered == 1)
            assert connector.pending() == [bid]
            await connector.start()
            await connector.wait_session(sessions + 1)
            await connector.wait_acks(1)
            assert connector.acks == [bid] and connector.pending() == []
            assert len(handled.events) == 1
            assert relay.stats.replays_dropped == 1


async def test_replay_while_in_flight_is_dropped_and_the_original_acks(
    connector: ReferenceConnector,
) -> None:
    handled = Handled()
    handled.gate = trio.Event()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled) as relay:
            bid = connector.buffer_inbound(event())
            await handled.started.wait()
            await reconnect(connector, relay)  # replays bid while it is being handled
            await eventually(lambda: relay.stats.replays_dropped == 1)
            assert connector.acks == []
            handled.gate.set()
            await connector.wait_acks(1)
            assert connector.acks == [bid] and len(handled.events) == 1


async def test_raw_wire_frame_is_what_dedupe_sees(connector: ReferenceConnector) -> None:
    # Numeric Telegram ids in a raw frame, then the same message with string ids, as a
    # store that kept text would replay it: one key, one run.
    handled = Handled()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled) as relay:
            await connector.inject_raw(
                '{"type":"inbound","bufferId":"raw-1","event":{"text":"hi","message_id":42,'
                '"source":{"platform":"Telegram","chat_id":-1001}}}\n'
            )
            await connector.wait_acks(1)
            bid = connector.buffer_inbound(event("telegram", "-1001", "42"))
            await connector.wait_acks(2)
            assert connector.acks == ["raw-1", bid]
            assert handled.keys == ["telegram:-1001:42"]
            assert relay.stats.replays_dropped == 1


async def test_platforms_never_collide(connector: ReferenceConnector) -> None:
    handled = Handled()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled):
            for platform in ("slack", "discord", "telegram"):
                connector.buffer_inbound(event(platform, "C1", "m1"))
            await connector.wait_acks(3)
            assert sorted(map(str, handled.keys)) == [
                "discord:C1:m1", "slack:C1:m1", "telegram:C1:m1"
            ]


class Platform(str, enum.Enum):  # noqa: UP042 (the str mixin users write, not StrEnum)
    SLACK = "slack"


async def test_enum_and_string_spelling_of_a_platform_are_one_key(
    connector: ReferenceConnector,
) -> None:
    handled = Handled()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled):
            connector.buffer_inbound(event(Platform.SLACK))  # serialised as its value
            await connector.wait_acks(1)
            connector.buffer_inbound(event("Slack"))
            connector.buffer_inbound(event(" SLACK"))
            await connector.wait_acks(3)
            assert handled.keys == ["slack:C1:m1"]


async def test_missing_ids_fail_open(connector: ReferenceConnector) -> None:
    handled = Handled()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled):
            for _ in range(2):
                connector.buffer_inbound(event(mid=None))
                connector.buffer_inbound(event(chat=None))
            await connector.wait_acks(4)
            assert handled.keys == [None] * 4


async def test_an_id_only_on_the_source_still_dedupes(connector: ReferenceConnector) -> None:
    # A connector that names the message only as source.message_id: the key falls back
    # to it, so a redelivery under another bufferId is not handled twice.
    handled = Handled()
    frame = (
        '{{"type":"inbound","bufferId":"{bid}","event":{{"text":"hi","source":'
        '{{"platform":"slack","chat_id":"C1","message_id":"s1"}}}}}}\n'
    )
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled) as relay:
            await connector.inject_raw(frame.format(bid="first"))
            await connector.wait_acks(1)
            await connector.inject_raw(frame.format(bid="again"))
            await connector.wait_acks(2)
            assert connector.acks == ["first", "again"]
            assert handled.keys == ["slack:C1:s1"] and relay.stats.replays_dropped == 1
            assert handled.events[0].message_id is None
            assert handled.events[0].source.message_id == "s1"


async def test_failed_handler_is_retried_in_the_same_session(
    connector: ReferenceConnector,
) -> None:
    handled = Handled()
    handled.fail = 1
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled) as relay:
            sessions = connector.handshakes
            bid = connector.buffer_inbound(event())
            await connector.wait_acks(1)  # no reconnect needed
            assert connector.handshakes == sessions and connector.pending() == []
            assert [e.attempt for e in handled.events] == [1, 2]
            assert (relay.stats.handler_failures, relay.stats.delivered) == (1, 1)
            assert connector.acks == [bid]


async def test_dead_letter_after_max_attempts(connector: ReferenceConnector) -> None:
    handled = Handled()
    handled.fail = 10**6
    letters: list[DeadLetter] = []

    async def on_dead_letter(letter: DeadLetter) -> None:
        letters.append(letter)

    with trio.fail_after(DEADLINE):
        async with relay_to(
            connector, on_message=handled, on_dead_letter=on_dead_letter,
            config={"max_delivery_attempts": 3},
        ) as relay:
            bid = connector.buffer_inbound(event())
            await connector.wait_acks(1)
            assert connector.acks == [bid] and len(handled.events) == 3
            (letter,) = letters
            assert (letter.reason, letter.attempts, letter.buffer_id) == (
                "attempts_exhausted", 3, bid
            )
            await reconnect(connector, relay)  # nothing left to replay
            await trio.sleep(0.05)
            assert len(handled.events) == 3


# --- leaving the block while handlers run ----------------------------------------------


async def test_leaving_gives_running_handlers_the_drain_timeout_and_acks_them(
    connector: ReferenceConnector,
) -> None:
    started, finished = trio.Event(), trio.Event()

    async def slow(ev: MessageEvent) -> None:
        started.set()
        await trio.sleep(0.2)
        finished.set()

    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=slow, config={"drain_timeout": 5.0}):
            bid = connector.buffer_inbound(event())
            await started.wait()  # running when the block is left
        assert finished.is_set()
        await connector.wait_acks(1)  # the ack went out before the socket closed
        assert connector.acks == [bid] and connector.pending() == []


async def test_a_handler_past_the_drain_timeout_is_cancelled_logged_and_redelivered(
    connector: ReferenceConnector, caplog: pytest.LogCaptureFixture
) -> None:
    handled = Handled()
    handled.gate = trio.Event()  # never set: outlives any drain
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=handled, config={"drain_timeout": 0.2}):
            bid = connector.buffer_inbound(event(mid="long-turn"))
            await handled.started.wait()
        assert connector.acks == [] and connector.pending() == [bid]
        assert "message_id=long-turn" in caplog.text and "not acked" in caplog.text
        second = Handled()
        async with relay_to(connector, on_message=second):  # the next run gets it
            await connector.wait_acks(1)
            assert second.keys == ["slack:C1:long-turn"]


# --- durability -----------------------------------------------------------------------


async def test_durable_dedupe_survives_a_client_restart(
    connector: ReferenceConnector, tmp_path: Path
) -> None:
    path = str(tmp_path / "dedupe.sqlite")
    first = Handled()
    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_message=first, config={"dedupe_path": path}):
            connector.buffer_inbound(event(mid="m1"))
            await connector.wait_acks(1)
        second = Handled()
        async with relay_to(connector, on_message=second, config={"dedupe_path": path}) as r2:
            # The connector lost its record of the ack and buffers the message again.
            again = connector.buffer_inbound(event(mid="m1"))
            fresh = connector.buffer_inbound(event(mid="m2"))
            await connector.wait_acks(3)
            assert sorted(connector.acks[1:]) == sorted([again, fresh])
            assert second.keys == ["slack:C1:m2"]
            assert r2.stats.replays_dropped == 1
        assert first.keys == ["slack:C1:m1"]


# --- passthrough ------------------------------------------------------------------------


async def test_passthrough_acked_after_the_handler(connector: ReferenceConnector) -> None:
    gate = trio.Event()
    seen: list[PassthroughForward] = []

    async def on_passthrough(forward: PassthroughForward) -> None:
        seen.append(forward)
        await gate.wait()

    with trio.fail_after(DEADLINE):
        async with relay_to(connector, on_passthrough=on_passthrough) as relay:
            bid = connector.buffer_passthrough(FORWARD)
            await eventually(lambda: len(seen) == 1)
            await trio.sleep(0.05)
            assert connector.acks == [] and connector.pending() == [bid]
            gate.set()
            await connector.wait_acks(1)
            assert connector.acks == [bid]
            assert seen[0].body == b"payload=%7B%7D" and seen[0].path == "/slack/actions"
            await reconnect(connector, relay)  # nothing pending: not run again
            await trio.sleep(0.05)
            assert len(seen) == 1
