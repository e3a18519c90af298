"""Hostile input: a connector that sends arbitrary sequences of valid, malformed,
duplicated, reordered and oversized frames, cut into WebSocket messages at arbitrary
points.

Hypothesis draws a *script* (requests left pending, then a list of lines, then how the
byte stream is cut into messages and whether it ends with a message over the size
limit); each example runs the script once inside its own ``trio.run`` under an
autojump ``MockClock`` against the reference connector on loopback. The properties:

- the relay never crashes: ``open_relay``'s block exits normally, every example;
- every request ends exactly as the script dictates (answered by the *first* result
  for its id, later duplicates ignored; or timed out exactly at its deadline; or lost
  with the connection) and never later than its deadline;
- ``stats.frames_rejected`` equals the number of malformed lines exactly: each line's
  fate is known when it is drawn (see :class:`Item`);
- malformed lines never cost the connection (one dial, no drop);
- valid deliveries are handled exactly once however often they are duplicated;
- a WebSocket message over ``max_message_bytes`` makes trio-websocket close the
  connection with 1009 (message too big); the relay then fails the requests still
  waiting on it at once (ambiguous: their frames were written) and reconnects.

What a script holds and how it is drawn: ``hostile_support.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket
from hostile_support import (
    LENIENT,
    LINE_LIMIT,
    MALFORMED,
    MESSAGE_LIMIT,
    Item,
    Script,
    as_message,
    cut,
    scripts,
)
from hypothesis import HealthCheck, given, settings

import trio_relay
from trio_relay import MessageEvent, Outcome, RelayConfig, State
from trio_relay.testing import JsonObject, Session, open_connector

TIMEOUT = 30.0
EPSILON = 1e-9


@dataclass
class Run:
    outcomes: dict[int, tuple[float, float, Outcome]] = field(default_factory=dict)
    handled: Counter[str | None] = field(default_factory=Counter)
    interrupts: int = 0


async def no_answer(session: Session, frame: Any) -> JsonObject | None:
    return None  # the script answers


async def play(script: Script) -> None:
    run = Run()

    async def on_message(message: MessageEvent) -> None:
        run.handled[message.message_id] += 1

    async def on_interrupt(session_key: str, chat_id: str) -> None:
        run.interrupts += 1

    config = RelayConfig(
        max_line_bytes=LINE_LIMIT,
        max_message_bytes=MESSAGE_LIMIT,
        request_timeout=TIMEOUT,
        ping_interval=100.0,
        ping_timeout=1000.0,
        close_timeout=0.5,
        drain_timeout=0.5,
    )
    barrier = script.pending  # one more request, answered after the script
    async with open_connector(outbound_handler=no_answer) as connector, trio_relay.open_relay(
        connector.url, on_message=on_message, on_interrupt=on_interrupt, config=config
    ) as relay:
        await relay.wait_connected(10)

        async def request(n: int) -> None:
            start = trio.current_time()
            outcome = await relay.request({"op": "send", "chat_id": "C", "content": "x", "n": n})
            run.outcomes[n] = (start, trio.current_time(), outcome)

        async with trio.open_nursery() as nursery:
            for n in range(script.pending + 1):
                nursery.start_soon(request, n)
            await connector.wait_outbound(script.pending + 1)
            by_n = {frame.action["n"]: frame.request_id for frame in connector.outbound}
            ids = [by_n[n] for n in range(script.pending + 1)]

            stream = b"".join(item.render(ids) for item in script.items)
            for chunk in cut(stream, script.cuts):
                await connector.inject_raw(as_message(chunk, script.binary))
            # Frames are read in order: once the barrier is answered, every line
            # before it has been through the reader.
            barrier_result = {"type": "outbound_result", "requestId": ids[barrier],
                              "result": {"success": True, "barrier": True}}
            await connector.inject_raw(json.dumps(barrier_result) + "\n")
            with trio.fail_after(TIMEOUT / 2):
                while barrier not in run.outcomes:
                    await trio.sleep(0.001)
            await trio.sleep(0.01)  # let the inbound pipeline finish its handlers

            assert relay.stats.frames_rejected == script.expected_rejected
            assert relay.state is State.CONNECTED
            assert (relay.stats.dials, relay.stats.connects) == (1, 1)
            assert not relay.stats.drops
            if script.end_with_oversized_message:
                dropped_at = trio.current_time()
                await connector.inject_raw("x" * (MESSAGE_LIMIT + 1))
                with trio.fail_after(TIMEOUT / 2):
                    while relay.stats.connects < 2:
                        await trio.sleep(0.001)
        assert relay.state is State.CONNECTED
        if script.end_with_oversized_message:
            assert connector.sessions[0].close_code == 1009  # "message too big"
            assert relay.stats.last_close_code == 1009

    check_outcomes(script, run, dropped_at if script.end_with_oversized_message else None)
    check_inbound(script, run)


def check_outcomes(script: Script, run: Run, dropped_at: float | None) -> None:
    assert set(run.outcomes) == set(range(script.pending + 1))
    first: dict[int, Item] = {}
    for item in script.items:
        if item.kind == "result" and item.request is not None:
            first.setdefault(item.request, item)
    for n in range(script.pending):
        start, end, outcome = run.outcomes[n]
        assert end - start <= TIMEOUT + EPSILON
        if n in first:
            result = first[n].payload.get("result") or {}
            assert outcome == Outcome.answered(result)
        elif dropped_at is not None:
            assert outcome.ambiguous and outcome.code == "connection_lost"
            assert end - dropped_at < 1.0  # failed as the connection died, not later
        else:
            assert outcome.ambiguous and outcome.code == "timeout"
            assert end - start == pytest.approx(TIMEOUT)
    assert run.outcomes[script.pending][2].result == {"success": True, "barrier": True}


def check_inbound(script: Script, run: Run) -> None:
    messages: set[str | None] = {
        f"h{item.message}" for item in script.items if item.kind == "inbound"
    }
    expected: Counter[str | None] = Counter(dict.fromkeys(messages, 1))
    expected[None] = sum(item.kind == "lenient" for item in script.items)
    assert run.handled == +expected
    assert run.interrupts == sum(item.kind == "interrupt" for item in script.items)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script=scripts())
def test_hostile_connector_scripts(script: Script) -> None:
    trio.run(play, script, clock=trio.testing.MockClock(autojump_threshold=0))


# --- fixed cases worth keeping whatever Hypothesis draws ------------------------------


def test_every_malformed_sample_is_rejected_once() -> None:
    script = Script(
        pending=1,
        items=[Item("raw", raw, rejected=1) for raw in MALFORMED]
        + [Item("lenient", raw) for raw in LENIENT]
        + [Item("result", {"result": {"success": True}}, request=0)],
        cuts=[],
        binary=True,
        end_with_oversized_message=False,
    )
    trio.run(play, script, clock=trio.testing.MockClock(autojump_threshold=0))


def test_an_oversized_line_never_resolves_its_request() -> None:
    script = Script(
        pending=1,
        items=[Item("oversized", request=0, rejected=1)],
        cuts=[100, 100, 100],  # and it arrives in pieces
        binary=False,
        end_with_oversized_message=False,
    )
    trio.run(play, script, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_message_over_the_limit_closes_1009_and_the_relay_reconnects() -> None:
    script = Script(
        pending=2,
        items=[Item("result", {"result": {"success": True}}, request=1)],
        cuts=[],
        binary=False,
        end_with_oversized_message=True,
    )
    trio.run(play, script, clock=trio.testing.MockClock(autojump_threshold=0))


# --- a ping that crosses our Close ----------------------------------------------------


async def test_a_ping_that_crosses_our_close_ends_the_connection_not_the_relay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A connector's heartbeat ping that reaches us after we sent our Close frame:
    trio-websocket's reader answers it with a Pong, which wsproto refuses after a Close
    (``LocalProtocolError``), and that kills the reader task in the connection's
    nursery. It must end the connection, never the relay: leaving ``open_relay`` stays
    clean (no exception group), and the connector logs no error either.

    The crossing is made deterministic by holding the connector's ping behind its
    silenced socket until the relay's Close is on the wire."""
    caplog.set_level(logging.ERROR)
    async with open_connector() as connector, trio.open_nursery() as nursery:

        async def ping(session: Session) -> None:
            assert session.ws is not None
            with trio.move_on_after(5), contextlib.suppress(trio_websocket.ConnectionClosed):
                await session.ws.ping(b"heartbeat")

        async def resume(session: Session) -> None:
            await trio.sleep(0.1)  # the relay's Close is sent meanwhile
            session.resume()

        config = RelayConfig(close_timeout=0.5)
        async with trio_relay.open_relay(connector.url, config=config) as relay:
            await relay.wait_connected(5)
            session = connector.current
            assert session is not None
            connector.go_silent(session)
            nursery.start_soon(ping, session)  # blocked at the gate
            await trio.sleep(0.01)
            nursery.start_soon(resume, session)
        assert relay.state is State.CLOSED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
