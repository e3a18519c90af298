"""The request path of the relay client, against the reference connector on loopback.

The table of docs/protocol.md, "Outcomes", row by row: answered, closing, not connected,
write failed, written-then-lost (ambiguous), timeout (ambiguous), egress refused; plus
batching, caller mistakes, cancellation and malformed frames interleaved with good ones.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

import trio_relay
from trio_relay import Identity, Outcome, RelayConfig
from trio_relay.testing import ReferenceConnector, open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector() as connector:
        yield connector


def config(**overrides: Any) -> RelayConfig:
    # A short close handshake keeps every test's exit fast; nothing else changes.
    return RelayConfig(close_timeout=0.2, **overrides)


async def test_round_trip_passes_the_result_through(connector: ReferenceConnector) -> None:
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        outcome = await relay.request(SEND)
    assert outcome == Outcome(success=True, result={"success": True, "message_id": "m1"})
    (frame,) = connector.outbound
    assert frame.action == SEND
    assert frame.platform is None and frame.bot_id is None
    assert relay.stats.requests["success"] == 1


async def test_platform_tagging_names_the_identity(connector: ReferenceConnector) -> None:
    identities = [Identity("slack", "B1"), Identity("discord", "D9")]
    async with trio_relay.open_relay(
        connector.url, identities=identities, config=config()
    ) as relay:
        await relay.wait_connected(5)
        assert list(relay.descriptors) == ["slack", "discord"]
        assert relay.default_platform == "slack"
        await relay.request(SEND, platform="discord")
        await relay.request(SEND)
        with pytest.raises(ValueError, match="no identity for platform 'telegram'"):
            await relay.request(SEND, platform="telegram")
    tagged, untagged = connector.outbound
    assert (tagged.platform, tagged.bot_id) == ("discord", "D9")
    assert (untagged.platform, untagged.bot_id) == (None, None)
    hellos = connector.sessions[0].hellos
    assert [(h.platform, h.bot_id) for h in hellos] == [("slack", "B1"), ("discord", "D9")]


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        ({"chat_id": "C1"}, TypeError, "string 'op'"),
        ({"op": 7}, TypeError, "string 'op'"),
        ("send", TypeError, "mapping"),
        ({"op": "send", "when": object()}, TypeError, "JSON-serialisable"),
        ({"op": "send", "n": float("nan")}, TypeError, "JSON-serialisable"),
        ({"op": "send", "content": "x" * 5000}, ValueError, "max_message_bytes"),
    ],
)
async def test_caller_mistakes_raise_and_send_nothing(
    connector: ReferenceConnector, action: Any, error: type[Exception], match: str
) -> None:
    async with trio_relay.open_relay(connector.url, config=config(max_message_bytes=4096)) as relay:
        await relay.wait_connected(5)
        with pytest.raises(error, match=match):
            await relay.request(action)
        assert (await relay.request(SEND)).success  # the relay is unharmed
    assert len(connector.outbound) == 1


async def test_ops_beyond_the_legacy_set_need_the_descriptor(
    connector: ReferenceConnector,
) -> None:
    connector.descriptors["relay"] = {"supported_ops": ["send", "react"]}
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        react = await relay.request(
            {"op": "react", "chat_id": "C", "message_id": "1", "emoji": "+1"}
        )
        delete = await relay.request({"op": "delete", "chat_id": "C", "message_id": "1"})
    assert react.success
    assert not delete.success and not delete.ambiguous and delete.code == "unsupported_op"
    assert [f.action["op"] for f in connector.outbound] == ["react"]


async def test_a_thousand_concurrent_requests_share_few_messages(
    connector: ReferenceConnector,
) -> None:
    outcomes: list[Outcome] = []
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)

        async def one(n: int) -> None:
            outcomes.append(await relay.request({"op": "send", "chat_id": "C", "content": str(n)}))

        async with trio.open_nursery() as nursery:
            for n in range(1000):
                nursery.start_soon(one, n)
    assert len(outcomes) == 1000 and all(o.success for o in outcomes)
    assert sorted(int(f.action["content"]) for f in connector.outbound) == list(range(1000))
    # The writer batched: far fewer WebSocket messages than frames.
    assert relay.stats.frames_sent >= 1000
    assert relay.stats.messages_sent < 200


async def test_a_burst_is_split_into_messages_within_max_message_bytes() -> None:
    # 64 requests of ~460 bytes of UTF-8 each (200 two-byte characters), started in one
    # turn, against a connector that fails any message over 4 KiB with 1009: the
    # writer must split the burst by its UTF-8 size, or the link drops.
    limit = 4096
    content = "\u00e9" * 200
    async with (
        open_connector(max_message_bytes=limit) as connector,
        trio_relay.open_relay(connector.url, config=config(max_message_bytes=limit)) as relay,
    ):
        await relay.wait_connected(5)
        outcomes: list[Outcome] = []
        frames, messages = relay.stats.frames_sent, relay.stats.messages_sent

        async def one() -> None:
            outcomes.append(await relay.request({"op": "send", "chat_id": "C", "content": content}))

        async with trio.open_nursery() as nursery:
            for _ in range(64):
                nursery.start_soon(one)
        assert len(outcomes) == 64 and all(o.success for o in outcomes), outcomes[:3]
        assert relay.stats.connects == 1 and not relay.stats.drops
        assert relay.stats.frames_sent - frames == 64
        # 64 x ~460 bytes is ~29 KiB: at least 8 messages, and batched (far fewer than 64).
        assert 8 <= relay.stats.messages_sent - messages < 64


async def test_large_requests_in_a_burst_leave_one_by_one_small_ones_together(
    connector: ReferenceConnector,
) -> None:
    # Ten 10 KiB sends started in one turn: each writes itself (its own message) as its
    # task runs, so the connector can answer the first while the rest are encoded; ten
    # small ones in the same turn go to the writer and leave in one or two messages.
    big = {"op": "send", "chat_id": "C", "content": "x" * (10 * 1024)}
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        sent = []
        for action in (big, SEND):
            frames, messages = relay.stats.frames_sent, relay.stats.messages_sent
            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(relay.request, action)
            sent.append(
                (relay.stats.frames_sent - frames, relay.stats.messages_sent - messages)
            )
    (big_frames, big_messages), (small_frames, small_messages) = sent
    assert big_frames == big_messages == 10
    assert small_frames == 10 and small_messages <= 2


async def test_drop_with_requests_in_flight_resolves_all_ambiguous_at_once(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    connector.withhold_results()
    outcomes: list[Outcome] = []
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)

        async def one() -> None:
            outcomes.append(await relay.request(SEND))

        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(one)
            await connector.wait_outbound(100)
            killed_at = trio.current_time()
            await connector.abort()
        resolved_at = trio.current_time()
    assert len(outcomes) == 100
    assert all(o.ambiguous and o.code == "connection_lost" and not o.success for o in outcomes)
    # No timer fired: the waiters were woken by the connection's end, not the 30 s timeout.
    assert resolved_at - killed_at < 1.0


async def test_frames_still_queued_when_the_link_dies_fail_definite(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    big = "x" * 60_000
    outcomes: list[Outcome] = []
    async with trio_relay.open_relay(
        connector.url, config=config(max_message_bytes=64_000)
    ) as relay:
        await relay.wait_connected(5)
        connector.go_silent()  # stops reading: the socket fills, the writer blocks

        async def one() -> None:
            # A deadline past the keepalive verdict, so the link's death decides.
            action = {"op": "send", "chat_id": "C", "content": big}
            outcomes.append(await relay.request(action, timeout=100))

        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(one)
        assert relay.stats.drops["keepalive timeout"] == 1
    codes = {o.code for o in outcomes}
    written = [o for o in outcomes if o.ambiguous]
    unwritten = [o for o in outcomes if not o.ambiguous]
    assert codes == {"connection_lost", "write_failed"}
    assert all(o.code == "connection_lost" for o in written)
    assert all(o.code == "write_failed" and not o.success for o in unwritten)
    # The kernel buffers hold a few MB at most; most of 12 MB never left.
    assert len(unwritten) > len(written)


async def test_between_connections_requests_fail_at_once(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        await connector.stop()
        await _until(lambda: relay.state is not trio_relay.State.CONNECTED)
        before = trio.current_time()
        outcome = await relay.request(SEND)
        assert trio.current_time() == before
        assert not outcome.success and not outcome.ambiguous
        assert outcome.code == "not_connected"
        assert "wait_connected=True" in (outcome.error or "")

        # Opting in waits for the next connection within the request's own deadline...
        timed_out = await relay.request(SEND, wait_connected=True, timeout=0.5)
        assert timed_out.code == "timeout" and not timed_out.ambiguous

        async def restart_soon() -> None:
            await trio.sleep(0.5)
            await connector.start()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(restart_soon)
            waited = await relay.request(SEND, wait_connected=True, timeout=60)
        assert waited.success


async def test_a_request_that_waited_for_the_connection_expires_at_its_own_deadline(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    # The deadline groups sort a request by the time it has left when it is added: one
    # that waited for the connection has less than its timeout. Pairs of waiters, the
    # second with a later deadline but the same time left at its start; whichever of a
    # pair is added first, each must time out at its own deadline, not its partner's.
    # (Redials at most 0.5 s apart: the link is back by about t=4.5 whatever the jitter;
    # with the default ladder a redial could come after the first deadline, at t=10.)
    connector.drop_results()
    fast_redial = config(backoff_initial=0.5, backoff_max=0.5)
    async with trio_relay.open_relay(connector.url, config=fast_redial) as relay:
        await relay.wait_connected(5)
        await connector.stop()
        await _until(lambda: relay.state is not trio_relay.State.CONNECTED)
        start = trio.current_time()
        ended: dict[str, float] = {}

        async def wait_and_send(name: str, delay: float) -> None:
            await trio.sleep(delay)
            outcome = await relay.request(SEND, wait_connected=True, timeout=10)
            assert outcome.code == "timeout" and outcome.ambiguous
            ended[name] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            for pair in range(8):
                nursery.start_soon(wait_and_send, f"{pair}a", 0.0)
                nursery.start_soon(wait_and_send, f"{pair}b", 2.0)
            await trio.sleep(4)
            await connector.start()
    assert len(ended) == 16
    for pair in range(8):
        assert ended[f"{pair}a"] == pytest.approx(10.0), ended
        assert ended[f"{pair}b"] == pytest.approx(12.0), ended


async def _until(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0.001)


async def test_no_result_in_time_is_ambiguous_timeout(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    connector.drop_results()
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        start = trio.current_time()
        outcome = await relay.request(SEND, timeout=5)
        assert trio.current_time() - start == pytest.approx(5)
        default = await relay.request(SEND)
        assert relay.state is trio_relay.State.CONNECTED  # a slow answer is not a dead link
    assert outcome.ambiguous and outcome.code == "timeout" and "5 s" in (outcome.error or "")
    assert default.ambiguous and "30 s" in (default.error or "")
    assert relay.stats.requests["timeout"] == 2


async def test_a_cancelled_request_leaves_no_trace(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    connector.withhold_results()
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        with trio.move_on_after(1):
            await relay.request(SEND)
        connector.release_results()  # the late result for the cancelled request
        await trio.sleep(1)
        assert (await relay.request(SEND)).success
        assert relay.stats.frames_rejected == 0
    assert sum(relay.stats.requests.values()) == 1  # the cancelled one has no outcome


async def test_connector_refusals_are_definite_and_passed_through(
    connector: ReferenceConnector,
) -> None:
    async def refuse(session: object, frame: Any) -> dict[str, Any]:
        return {"success": False, "code": "egress_declined", "error": "not allowed"}

    connector.outbound_handler = refuse
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        outcome = await relay.request(SEND)
    assert not outcome.success and not outcome.ambiguous
    assert (outcome.code, outcome.error) == ("egress_declined", "not allowed")
    assert relay.stats.requests["failed"] == 1
    assert len(connector.outbound) == 1  # never retried as another op


async def test_malformed_frames_interleaved_with_good_ones(
    connector: ReferenceConnector,
) -> None:
    connector.withhold_results()
    async with trio_relay.open_relay(connector.url, config=config(max_line_bytes=1000)) as relay:
        await relay.wait_connected(5)
        async with trio.open_nursery() as nursery:
            outcomes: dict[int, Outcome] = {}

            async def one(n: int) -> None:
                outcomes[n] = await relay.request({"op": "send", "chat_id": "C", "content": str(n)})

            for n in range(3):
                nursery.start_soon(one, n)
            await connector.wait_outbound(3)
            ids = {int(f.action["content"]): f.request_id for f in connector.outbound}

            def result(n: int, **fields: Any) -> str:
                frame = {"type": "outbound_result", "requestId": ids[n], **fields}
                return json.dumps(frame) + "\n"

            bad_lines = [
                "not json\n",
                "[1, 2]\n",
                '"a string"\n',
                '{"no_type": 1}\n',
                '{"type": 5}\n',
                '{"type": "from_the_future"}\n',
                '{"type": "outbound_result"}\n',  # missing requestId
                '{"type": "outbound_result", "requestId": "x", "result": []}\n',
                '{"type": "inbound"}\n',  # missing event
                "{" + "x" * 2000 + "\n",  # over max_line_bytes
            ]
            message = (
                bad_lines[0]
                + result(0, result={"success": True, "via": "injected"})
                + "".join(bad_lines[1:5])
                + result(1)  # no result object: read as {}
                + "".join(bad_lines[5:])
                + '{"type": "outbound_result", "requestId": "unknown-id", "result": {}}\n'
            )
            await connector.inject_raw(message)
            await connector.inject_raw(b'\xff\xfe{"type": "going_idle_ack"}\n')  # bad UTF-8
            await _until(lambda: len(outcomes) == 2)
            assert relay.state is trio_relay.State.CONNECTED
            connector.release_results()  # genuine results; 0 and 1 are late, ignored
    assert outcomes[0] == Outcome(success=True, result={"success": True, "via": "injected"})
    assert outcomes[1] == Outcome(success=False, result={})
    assert outcomes[2].success
    assert relay.stats.frames_rejected == len(bad_lines) + 1
    assert relay.stats.dials == 1


async def test_interrupt_is_fire_and_forget(connector: ReferenceConnector) -> None:
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        assert not relay.interrupt("s1", "user asked")  # not connected yet: nothing sent
        await relay.wait_connected(5)
        assert relay.interrupt("s1", "user asked")
        await connector.wait_until(
            lambda: any(type(f).__name__ == "Interrupt" for f in connector.received)
        )
    (interrupt,) = [f for f in connector.received if type(f).__name__ == "Interrupt"]
    assert interrupt.to_wire() == {"type": "interrupt", "session_key": "s1", "reason": "user asked"}


async def test_ping_measures_a_round_trip(connector: ReferenceConnector) -> None:
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        with pytest.raises(ConnectionError):
            await relay.ping()
        await relay.wait_connected(5)
        rtt = await relay.ping()
    assert 0 < rtt == relay.stats.ping_rtt


async def test_an_unbounded_timeout_is_allowed_and_nonsense_is_refused(
    connector: ReferenceConnector,
) -> None:
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        assert (await relay.request(SEND, timeout=float("inf"))).success
        for bad in (0, -1, float("nan")):
            with pytest.raises(ValueError, match="positive number of seconds"):
                await relay.request(SEND, timeout=bad)
    assert len(connector.outbound) == 1


async def _ping_raises_connection_error(relay: trio_relay.Relay) -> None:
    with pytest.raises(ConnectionError):
        await relay.ping(timeout=30)


async def _go_idle_returns_false(relay: trio_relay.Relay) -> None:
    assert not await relay.go_idle(timeout=30)


@pytest.mark.parametrize("wait", [_ping_raises_connection_error, _go_idle_returns_false])
async def test_a_wait_on_the_peer_ends_at_once_when_the_link_drops(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock, wait: Any
) -> None:
    """A ping awaiting its pong, or go_idle awaiting its ack, ends with the link rather
    than at its own 30 s timeout."""
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        session = connector.current
        connector.go_silent()  # neither the pong nor the ack ever comes
        async with trio.open_nursery() as nursery:

            async def waiting() -> None:
                start = trio.current_time()
                await wait(relay)
                assert trio.current_time() - start < 30  # not the timeout

            nursery.start_soon(waiting)
            await trio.sleep(1)
            await connector.abort(session)


async def test_a_text_message_that_is_not_utf8_fails_the_connection_with_1007(
    connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    """RFC 6455 §8.1: the gateway fails the connection (1007); the request in flight
    ends ambiguous at once, not at its timeout; the relay dials again."""
    async with trio_relay.open_relay(connector.url, config=config()) as relay:
        await relay.wait_connected(5)
        first = connector.current
        assert first is not None
        connector.withhold_results()
        outcomes: list[Outcome] = []
        async with trio.open_nursery() as nursery:

            async def send() -> None:
                outcomes.append(await relay.request(SEND))

            nursery.start_soon(send)
            await connector.wait_outbound(1)
            started = trio.current_time()
            # Valid JSON but for one byte: \xc3 needs a continuation byte, "(" is none.
            bad = b'{"type": "going_idle_ack", "x": "\xc3("}\n'
            await connector.inject_raw(bad, as_text=True)
            with trio.fail_after(1):  # without the check: the request's 30 s timeout
                await first.closed.wait()
        assert trio.current_time() - started < 1  # not the 30 s request timeout
        assert outcomes[0].ambiguous and not outcomes[0].success, outcomes[0]
        assert first.close_code == 1007
        connector.release_results()
        await connector.wait_session(2)
        await relay.wait_connected(5)
        assert relay.stats.dials == 2
        again = await relay.request(SEND)
    assert again.success, again
