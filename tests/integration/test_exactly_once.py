"""Exactly once through idempotency keys (docs/protocol.md, "Idempotency keys").

The real relay against the reference connector (``idempotency_window=``) and against a
connector of this file's own, on loopback, under the autojump clock: a reset after the
write, a lost result, a conflict, a platform without the extension (today's frames,
today's ambiguous outcome), a caller's key across a relay restart, a deadline that runs
out, and keys kept out of logs above DEBUG.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

import trio_relay
from trio_relay import Outcome, RelayConfig
from trio_relay.testing import FaultDialer, ReferenceConnector, open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}
WINDOW = 600.0


def config(**overrides: Any) -> RelayConfig:
    return RelayConfig(close_timeout=0.2, **overrides)


def sent_messages(connector: ReferenceConnector, chat_id: str = "C1") -> list[str | None]:
    """The messages the chat shows: what a user would read."""
    return [e.text for e in connector.transcript(chat_id) if e.direction == "out"]


async def _request_during_reset(
    relay: trio_relay.Relay, connector: ReferenceConnector, action: dict[str, Any]
) -> Outcome:
    """Send ``action``; once the connector carried it out (its result held back),
    reset the TCP connection, then let results flow again."""
    connector.withhold_results()
    outcomes: list[Outcome] = []

    async def send() -> None:
        outcomes.append(await relay.request(action, timeout=10))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        await connector.wait_outbound(1)
        await connector.abort()
        connector.release_results()  # (the first result went with its session)
    (outcome,) = outcomes
    return outcome


async def test_a_reset_after_the_write_is_sent_again_and_carried_out_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            assert relay.descriptors["relay"].idempotency_window_s == WINDOW
            outcome = await _request_during_reset(relay, connector, SEND)
            stats = {k: v for k, v in relay.stats.requests.items() if v}
        assert outcome.success and not outcome.ambiguous
        assert outcome.attempts == 2 and outcome.replayed
        first, again = connector.outbound
        assert first.action == again.action  # the same action, the same key
        assert first.request_id != again.request_id  # a request of its own each time
        key = first.action["idempotency_key"]
        assert key.startswith("tr.") and len(key) <= 64
        assert outcome.result["message_id"] == "m1"
        assert sent_messages(connector) == ["hi"]  # carried out once
        assert connector.keys is not None and connector.keys.replays == 1
        # The caller got one outcome, and the stats count that one only.
        assert stats == {"success": 1}


async def test_a_lost_result_is_asked_again_on_the_same_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        connector.lose_results(1, where=lambda action: action["op"] == "send")
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            start = trio.current_time()
            outcome = await relay.request(SEND, timeout=10)
            took = trio.current_time() - start
        assert outcome.success and outcome.attempts == 2 and outcome.replayed
        assert len(connector.sessions) == 1  # no drop: the result was missed in time
        assert took == pytest.approx(5.0)  # the first attempt had half the deadline
        assert sent_messages(connector) == ["hi"]


async def test_a_slow_first_result_still_counts_after_the_ask_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        connector.delay_results(6)  # every result, the replay's too, 6 s late
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            start = trio.current_time()
            outcome = await relay.request(SEND, timeout=10)
            took = trio.current_time() - start
        # Asked again at 5 s (its replay would come at 11 s); the first answer, at 6 s,
        # is the answer.
        assert outcome.success and not outcome.replayed and outcome.attempts == 2
        assert took == pytest.approx(6.0)
        assert len(connector.outbound) == 2 and sent_messages(connector) == ["hi"]


async def test_a_key_reused_for_another_action_is_a_conflict(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            first = await relay.request(SEND, idempotency_key="order-42")
            other = {**SEND, "content": "something else"}
            conflict = await relay.request(other, idempotency_key="order-42")
        assert first.success and not first.replayed and first.attempts == 1
        assert not conflict.success and not conflict.ambiguous
        assert conflict.code == "idempotency_conflict" and conflict.attempts == 1
        assert "order-42" not in (conflict.error or "")
        assert sent_messages(connector) == ["hi"]


async def test_a_platform_without_the_field_keeps_todays_frames_and_outcome(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written: list[bytes] = []

    def tap(payload: bytes, returned: bool) -> None:
        if returned and b'"outbound"' in payload:
            written.append(payload)

    async with open_connector() as connector:
        dialer = FaultDialer(tap=tap)
        async with trio_relay.open_relay(connector.url, config=config(dialer=dialer)) as relay:
            await relay.wait_connected(5)
            assert relay.descriptors["relay"].idempotency_window_s is None
            outcome = await _request_during_reset(relay, connector, SEND)
            await relay.wait_connected(5)
            edit = await relay.request(
                {"op": "edit", "chat_id": "C1", "message_id": "m1", "content": "hi!"},
                idempotency_key="caller-key",  # nothing of the extension for this platform
            )
        assert outcome.ambiguous and outcome.code == "connection_lost"
        assert outcome.attempts == 1 and not outcome.replayed
        assert edit.success
        sent, edited = connector.outbound
        assert [frame.action for frame in connector.outbound] == [
            SEND,
            {"op": "edit", "chat_id": "C1", "message_id": "m1", "content": "hi!"},
        ]
        assert written == [
            b'{"type":"outbound","requestId":"'
            + sent.request_id.encode()
            + b'","action":{"op":"send","chat_id":"C1","content":"hi"}}\n',
            b'{"type":"outbound","requestId":"'
            + edited.request_id.encode()
            + b'","action":{"op":"edit","chat_id":"C1","message_id":"m1","content":"hi!"}}\n',
        ]


async def test_retry_ambiguous_false_keeps_todays_behaviour(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        relay_config = config(retry_ambiguous=False)
        async with trio_relay.open_relay(connector.url, config=relay_config) as relay:
            await relay.wait_connected(5)
            outcome = await _request_during_reset(relay, connector, SEND)
        assert outcome.ambiguous and outcome.code == "connection_lost" and outcome.attempts == 1
        (frame,) = connector.outbound
        assert frame.action == SEND  # no key of the relay's own


async def test_a_callers_key_survives_a_relay_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        outcomes = []
        for _ in range(2):  # the caller restarts between the two
            async with trio_relay.open_relay(connector.url, config=config()) as relay:
                await relay.wait_connected(5)
                outcomes.append(await relay.request(SEND, idempotency_key="turn-7:reply-1"))
        first, again = outcomes
        assert first.success and not first.replayed
        assert again.success and again.replayed and again.attempts == 1
        assert again.result["message_id"] == first.result["message_id"]
        assert [f.action["idempotency_key"] for f in connector.outbound] == ["turn-7:reply-1"] * 2
        assert sent_messages(connector) == ["hi"]


async def test_a_deadline_that_runs_out_is_ambiguous_and_says_how_often(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        connector.drop_results()
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            start = trio.current_time()
            outcome = await relay.request(SEND, timeout=8)
            assert trio.current_time() - start == pytest.approx(8.0)
            stats = {k: v for k, v in relay.stats.requests.items() if v}
        assert outcome.ambiguous and outcome.code == "timeout" and "8 s" in (outcome.error or "")
        assert outcome.attempts == len(connector.outbound) > 2
        assert sent_messages(connector) == ["hi"]
        assert stats == {"timeout": 1}


async def test_the_caller_mistakes_are_refused_when_made() -> None:
    async with open_connector(idempotency_window=WINDOW) as connector:
        async with trio_relay.open_relay(connector.url, config=config()) as relay:
            await relay.wait_connected(5)
            with pytest.raises(ValueError, match="1 to 64 characters"):
                await relay.request(SEND, idempotency_key="has spaces")
            with pytest.raises(ValueError, match="1 to 64 characters"):
                await relay.request(SEND, idempotency_key="k" * 65)
            with pytest.raises(ValueError, match="content ops"):
                await relay.request({"op": "typing", "chat_id": "C1"}, idempotency_key="k1")
            with pytest.raises(ValueError, match="give the key once"):
                await relay.request({**SEND, "idempotency_key": "a"}, idempotency_key="b")
        assert connector.outbound == []


async def test_keys_are_never_logged_above_debug(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        open_connector(idempotency_window=WINDOW) as connector,
        trio_relay.open_relay(connector.url, config=config()) as relay,
    ):
        await relay.wait_connected(5)
        outcome = await _request_during_reset(relay, connector, SEND)
        conflict = await relay.request({**SEND, "content": "x"}, idempotency_key="secretkey")
        await relay.request(SEND, idempotency_key="secretkey")
    assert outcome.attempts == 2 and conflict.code is None
    key = connector.outbound[0].action["idempotency_key"]
    debug = [r for r in caplog.records if key in r.getMessage()]
    assert debug and all(r.levelno == logging.DEBUG for r in debug)  # the resend, at DEBUG
    louder = [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG]
    assert louder and not [m for m in louder if key in m or "secretkey" in m]


# --- a connector of our own ------------------------------------------------------------


class OwnConnector:
    """A minimal connector of the extension, written from docs/protocol.md alone: its
    first connection carries out the first keyed send and dies without answering; later
    ones answer a known key from memory, marked replayed."""

    def __init__(self) -> None:
        self.carried_out: dict[str, dict[str, Any]] = {}
        self.actions: list[dict[str, Any]] = []
        self.connections = 0

    async def handle(self, request: WebSocketRequest) -> None:
        ws = await request.accept()
        self.connections += 1
        first_connection = self.connections == 1
        try:
            while True:
                message = await ws.get_message()
                for line in str(message).splitlines():
                    frame = json.loads(line)
                    if frame["type"] == "hello":
                        descriptor = {
                            "contract_version": 1,
                            "platform": frame["platform"],
                            "label": "own",
                            "idempotency_window_s": 30,
                        }
                        await ws.send_message(
                            json.dumps({"type": "descriptor", "descriptor": descriptor}) + "\n"
                        )
                    elif frame["type"] == "outbound":
                        action = frame["action"]
                        self.actions.append(action)
                        key = action["idempotency_key"]
                        if key in self.carried_out:
                            result = {**self.carried_out[key], "replayed": True}
                        else:
                            result = self.carried_out[key] = {"success": True, "message_id": "x1"}
                            if first_connection:
                                await ws.aclose(1011, "crashed after the platform call")
                                return
                        reply = {"type": "outbound_result", "requestId": frame["requestId"]}
                        await ws.send_message(json.dumps({**reply, "result": result}) + "\n")
        except ConnectionClosed:
            pass


async def test_against_a_connector_of_our_own(autojump_clock: trio.testing.MockClock) -> None:
    own = OwnConnector()
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, own.handle, "127.0.0.1", 0, None)
        port = server.port
        async with trio_relay.open_relay(f"http://127.0.0.1:{port}", config=config()) as relay:
            await relay.wait_connected(5)
            outcome = await relay.request(SEND, timeout=10)
        nursery.cancel_scope.cancel()
    assert outcome.success and outcome.replayed and outcome.attempts == 2
    assert own.connections == 2 and len(own.carried_out) == 1
    first, again = own.actions
    assert first == again and first["idempotency_key"].startswith("tr.")
