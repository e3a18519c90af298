"""Limits: each has a default a user can change, and each fails clearly.

- ``max_queued_frames``: a request beyond it fails at once, definitely (``queue_full``),
  instead of queueing without bound behind a stalled writer;
- ``max_message_bytes``: an action over it is the caller's mistake (``ValueError``),
  whatever the connection state; a message over it *from* the connector closes the
  connection with 1009 and the relay reconnects;
- ``max_line_bytes``: a line over it is rejected and counted, even when it arrives in
  pieces, and costs neither the connection nor the frames around it;
- backpressure honesty: a request that gives up while the writer is stalled must not be
  reported "nothing was sent" if its frame may still leave.

``max_inbound_queue`` is covered end to end in ``test_inbound.py`` (a full queue drops
buffered deliveries without ack; the connector's replay brings them back).

Timed tests run under the autojump clock: a stalled connector (``go_silent``) leaves
every task waiting, so mock time runs straight to the next deadline.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import trio_relay
from trio_relay import Outcome, RelayConfig, State
from trio_relay.testing import ReferenceConnector, open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


def config(**overrides: Any) -> RelayConfig:
    # Keepalive far away: these tests stall the connector on purpose and must not be
    # cut short by the dead-peer check.
    defaults: dict[str, Any] = {
        "close_timeout": 0.2,
        "drain_timeout": 0.5,
        "ping_interval": 5_000.0,
        "ping_timeout": 10_000.0,
    }
    defaults.update(overrides)
    return RelayConfig(**defaults)


def test_defaults_and_validation() -> None:
    defaults = RelayConfig()
    assert defaults.max_message_bytes == 1 << 20
    assert defaults.max_line_bytes == 1 << 20
    assert defaults.max_queued_frames == 10_000
    assert defaults.max_inbound_queue == 1_000
    changed = RelayConfig(
        max_message_bytes=4096, max_line_bytes=512, max_queued_frames=3, max_inbound_queue=2
    )
    assert (changed.max_message_bytes, changed.max_line_bytes) == (4096, 512)
    for name in ("max_message_bytes", "max_line_bytes", "max_queued_frames", "max_inbound_queue"):
        for bad in (0, -1):
            with pytest.raises(ValueError, match=f"RelayConfig.{name} must be positive"):
                RelayConfig(**{name: bad})


# --- max_queued_frames ----------------------------------------------------------------


async def test_a_request_beyond_max_queued_frames_fails_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limit = 4
    big = "x" * 400_000
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config(max_queued_frames=limit, request_timeout=1_000.0)
    ) as relay:
        await relay.wait_connected(5)
        session = connector.current
        connector.go_silent()  # stops reading: the kernel buffers fill, the writer blocks
        outcomes: dict[int, Outcome] = {}

        async def one(n: int) -> None:
            outcomes[n] = await relay.request({**SEND, "content": big, "n": n})

        async with trio.open_nursery() as nursery:
            n = 0
            while not any(o.code == "queue_full" for o in outcomes.values()):
                assert n < 200, "the writer never stalled"
                nursery.start_soon(one, n)
                n += 1
                await trio.sleep(0.001)
            # The queue is full now: another request fails without waiting...
            started = trio.current_time()
            refused = await relay.request({**SEND, "n": -1})
            assert trio.current_time() == started
            assert (refused.success, refused.ambiguous, refused.code) == (
                False, False, "queue_full"
            )
            assert refused.error is not None and "max_queued_frames" in refused.error
            assert f"{limit} frames" in refused.error
            # ... and fire-and-forget frames are refused too.
            assert relay.interrupt("session-1") is False
            assert relay.state is State.CONNECTED
            connector.resume_session(session)
        full = {k for k, o in outcomes.items() if o.code == "queue_full"}
        assert all(o.success for k, o in outcomes.items() if k not in full)
        assert (await relay.request(SEND)).success  # the queue drained
        assert relay.stats.requests["queue_full"] == len(full) + 1
    sent = {frame.action.get("n") for frame in connector.outbound}
    assert not sent & (full | {-1})  # a definite failure: nothing was sent


# --- max_message_bytes ----------------------------------------------------------------


async def test_an_action_over_max_message_bytes_is_refused_even_between_connections() -> None:
    async with open_connector() as connector:
        await connector.stop()  # nothing to connect to
        async with trio_relay.open_relay(
            connector.url, config=config(max_message_bytes=1000)
        ) as relay:
            assert relay.state is not State.CONNECTED
            with pytest.raises(ValueError) as info:
                await relay.request({**SEND, "content": "x" * 1000})
            message = str(info.value)
            assert "over max_message_bytes (1000)" in message
            assert "split it or raise the limit" in message
            # A small one is not the caller's fault: an outcome, not an exception.
            outcome = await relay.request(SEND)
            assert outcome.code == "not_connected"


async def test_an_action_exactly_at_the_limit_is_sent() -> None:
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config(max_message_bytes=2000)
    ) as relay:
        await relay.wait_connected(5)
        # Find the largest content that still fits, then one more byte.
        probe = {**SEND, "content": ""}
        overhead = len(
            json.dumps(
                {"type": "outbound", "requestId": "0" * 16, "action": probe},
                separators=(",", ":"),
            )
        ) + 1
        fits = {**SEND, "content": "y" * (2000 - overhead)}
        assert (await relay.request(fits)).success
        with pytest.raises(ValueError, match="max_message_bytes"):
            await relay.request({**SEND, "content": "y" * (2001 - overhead)})


async def test_a_message_over_max_message_bytes_from_the_connector_closes_1009(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """trio-websocket enforces the size while reading; over it, it closes with 1009
    (message too big). The relay treats that as an ordinary drop: it fails the
    requests on the connection and reconnects."""
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config(max_message_bytes=4096)
    ) as relay:
        await relay.wait_connected(5)
        connector.withhold_results()
        async with trio.open_nursery() as nursery:
            pending: list[Outcome] = []

            async def one() -> None:
                pending.append(await relay.request(SEND))

            nursery.start_soon(one)
            await connector.wait_outbound(1)
            await connector.inject_raw("x" * 4097)
        assert pending[0].ambiguous and pending[0].code == "connection_lost"
        await connector.sessions[0].closed.wait()
        assert connector.sessions[0].close_code == 1009
        assert relay.stats.last_close_code == 1009
        connector.release_results()
        await connector.wait_session(2)
        await relay.wait_connected(5)
        assert (await relay.request(SEND)).success
        # Exactly at the limit is fine.
        await connector.inject_raw(" " * 4095 + "\n")
        assert (await relay.request(SEND)).success
        assert relay.stats.connects == 2


# --- max_line_bytes -------------------------------------------------------------------


async def test_an_overlong_line_in_pieces_is_rejected_once_and_costs_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limit = 1000
    async with open_connector() as connector:
        connector.withhold_results()
        async with trio_relay.open_relay(
            connector.url, config=config(max_line_bytes=limit)
        ) as relay:
            await relay.wait_connected(5)
            outcomes: list[Outcome] = []
            async with trio.open_nursery() as nursery:

                async def one() -> None:
                    outcomes.append(await relay.request(SEND))

                nursery.start_soon(one)
                await connector.wait_outbound(1)
                request_id = connector.outbound[0].request_id
                good = json.dumps(
                    {"type": "outbound_result", "requestId": request_id,
                     "result": {"success": True, "via": "after"}}
                ) + "\n"
                # A valid frame for the pending request, but too long: rejected whole.
                long_line = json.dumps(
                    {"type": "outbound_result", "requestId": request_id,
                     "result": {"success": True, "pad": "p" * (3 * limit)}}
                )
                pieces = [long_line[i : i + 400] for i in range(0, len(long_line), 400)]
                for piece in pieces:
                    await connector.inject_raw(piece)  # no newline yet: still one line
                await connector.inject_raw("\n" + good)
            assert outcomes == [Outcome(success=True, result={"success": True, "via": "after"})]
            assert relay.stats.frames_rejected == 1
            assert (relay.stats.dials, relay.state) == (1, State.CONNECTED)


# --- backpressure honesty -------------------------------------------------------------
# A request that gives up while the writer is stalled must not be told "nothing was
# sent" if its frame may still leave: the writer re-checks abandoned items per message,
# and a frame whose message is being written counts as possibly delivered.


async def stalled_batch(
    connector: ReferenceConnector, relay: trio_relay.Relay, count: int
) -> dict[int, Outcome]:
    """``count`` requests with a 1 s timeout queued while the connector is silent (so
    the writer is blocked mid-batch), then the connector resumes and a last request
    proves everything that was going to arrive has arrived."""
    session = connector.current
    connector.go_silent()
    outcomes: dict[int, Outcome] = {}

    async def one(n: int) -> None:
        action = {**SEND, "content": "z" * 6000, "n": n}
        outcomes[n] = await relay.request(action, timeout=1.0)

    async with trio.open_nursery() as nursery:
        for n in range(count):
            nursery.start_soon(one, n)
    assert all(o.code == "timeout" for o in outcomes.values())
    connector.resume_session(session)
    last = await relay.request({**SEND, "n": -1}, timeout=60)
    assert last.success  # frames are FIFO: everything before it has arrived
    return outcomes


async def test_a_request_that_gave_up_behind_a_stalled_writer_is_never_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(outbound_handler=None) as connector, trio_relay.open_relay(
        connector.url, config=config(max_message_bytes=8192)
    ) as relay:
        await relay.wait_connected(5)
        outcomes = await stalled_batch(connector, relay, 1500)
    received = {frame.action["n"] for frame in connector.outbound}
    definite = {n for n, o in outcomes.items() if not o.ambiguous}
    assert definite, "the writer never stalled: nothing to check"
    assert not definite & received, (
        f"{len(definite & received)} requests reported 'nothing was sent' reached the connector"
    )


async def test_a_frame_being_written_when_its_request_gives_up_is_ambiguous(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One message per frame, so the request whose message is blocked in the socket
    is the one in flight: its frame arrives once the connector reads again, so its
    outcome cannot be definite."""
    async with open_connector(outbound_handler=None) as connector, trio_relay.open_relay(
        connector.url, config=config(max_message_bytes=7000)
    ) as relay:
        await relay.wait_connected(5)
        outcomes = await stalled_batch(connector, relay, 1500)
    received = {frame.action["n"] for frame in connector.outbound} - {-1}
    ambiguous = {n for n, o in outcomes.items() if o.ambiguous}
    assert received, "nothing was written: nothing to check"
    assert received <= ambiguous
