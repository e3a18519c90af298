"""Under a test's dialer the relay writes as it does on a real socket.

Every stream a dialer returns has the relay's one stream interface, ``send_nowait``
(the direct write: what the stream takes now, never waiting) included, so a request on
an idle link writes its own frame under ``FaultDialer`` and ``MemoryDialer`` too, and
the fault tests and the soak exercise the path production takes for most requests.
``FaultDialer.direct_writes`` and ``.awaited_writes`` count the two write paths.
"""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing
import trio_websocket

import trio_relay
from trio_relay import RelayConfig
from trio_relay.testing import (
    FaultDialer,
    MemoryDialer,
    default_descriptor,
    memory_stream_pair,
    open_connector,
)

SEND = {"op": "send", "chat_id": "C", "content": "hi"}


async def test_a_request_under_a_fault_dialer_writes_its_own_frame(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dialer = FaultDialer()
    config = RelayConfig(dialer=dialer)
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        direct, awaited = dialer.direct_writes, dialer.awaited_writes
        assert direct >= 1  # the hellos went out the same way
        outcome = await relay.request(SEND, timeout=5)
        assert outcome.success
        assert dialer.direct_writes == direct + 1
        assert dialer.awaited_writes == awaited  # the writer task was not needed
        assert [frame.action["content"] for frame in connector.outbound] == ["hi"]


async def test_a_held_direct_write_falls_back_to_the_writer_with_nothing_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dialer = FaultDialer()
    config = RelayConfig(dialer=dialer, ping_interval=60, ping_timeout=120)
    outcomes: list[trio_relay.Outcome] = []

    async def request(content: str) -> None:
        outcomes.append(await relay.request({**SEND, "content": content}, timeout=30))

    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        direct, awaited = dialer.direct_writes, dialer.awaited_writes
        dialer.hold_writes()  # a full receive window: send_nowait takes nothing
        async with trio.open_nursery() as nursery:
            for content in ("one", "two", "three"):
                nursery.start_soon(request, content)
                await trio.sleep(0.5)
            # Nothing left: the first request's direct write was taken by nobody, and
            # the writer task waits in send_all with it (the rest queued behind).
            assert connector.outbound == []
            assert outcomes == []
            assert dialer.direct_writes == direct
            dialer.release_writes()
        assert [outcome.success for outcome in outcomes] == [True, True, True]
        # Each frame arrived once, in order: the held bytes were neither lost nor
        # written twice when the writer took over.
        assert [frame.action["content"] for frame in connector.outbound] == [
            "one",
            "two",
            "three",
        ]
        assert dialer.direct_writes == direct
        assert dialer.awaited_writes > awaited
        # The link quiet again (the first request after the burst may still be batched
        # by the writer, as a burst's follower is): requests write themselves again.
        for _ in range(2):
            assert (await relay.request(SEND, timeout=5)).success
        assert dialer.direct_writes > direct


async def test_writes_failing_under_a_direct_write_end_the_request_and_the_link(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dialer = FaultDialer()
    config = RelayConfig(dialer=dialer)
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        direct = dialer.direct_writes
        dialer.fail_writes()
        outcome = await relay.request(SEND, timeout=5)
        assert not outcome.success
        assert outcome.ambiguous  # its write had begun
        assert dialer.direct_writes == direct  # refused, not taken
        dialer.fail_writes(False)
        await dialer.wait_dials(2)  # the failed write ended the link: a redial
        await relay.wait_connected(5)
        assert (await relay.request(SEND, timeout=5)).success
        assert dialer.direct_writes > direct


async def test_a_direct_write_into_a_stalled_link_vanishes_and_the_request_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dialer = FaultDialer()
    config = RelayConfig(dialer=dialer, ping_interval=60, ping_timeout=120)
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        direct = dialer.direct_writes
        dialer.stall()  # a vanished peer: the stream takes the bytes, nobody gets them
        outcome = await relay.request(SEND, timeout=1)
        assert outcome.code == "timeout"
        assert outcome.ambiguous  # handed to the socket: the connector may have it
        assert dialer.direct_writes == direct + 1
        assert connector.outbound == []
        dialer.resume()


# --- the memory stream ---------------------------------------------------------------


async def test_a_memory_stream_takes_what_its_window_holds_and_no_more() -> None:
    client, server = memory_stream_pair(window=8)
    assert client.send_nowait(b"12345") == 5
    assert client.send_nowait(b"6789abc") == 3  # the window is full at 8
    assert client.send_nowait(b"x") == 0
    assert await server.receive_some(4) == b"1234"
    assert client.send_nowait(b"xyzuvw") == 4  # room for the 4 bytes read
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.send_all, b"waits")  # no room: waits for the reader
        await trio.testing.wait_all_tasks_blocked()
        received = b""
        while len(received) < 13:
            received += await server.receive_some()
    assert received == b"5678xyzu" + b"waits"


async def test_a_memory_stream_ends_like_a_socket() -> None:
    client, server = memory_stream_pair()
    client.send_nowait(b"last")
    client.close()
    assert await server.receive_some() == b"last"
    assert await server.receive_some() == b""  # EOF once the bytes are read
    with pytest.raises(trio.ClosedResourceError):
        client.send_nowait(b"more")
    with pytest.raises(trio.BrokenResourceError):
        server.send_nowait(b"to nobody")  # the peer is gone


async def test_a_relay_over_a_memory_dialer_writes_directly() -> None:
    """No socket at all: a WebSocket server written in the test, on the other end of a
    memory stream, behind a FaultDialer that counts the relay's writes."""
    results: list[str] = []

    async def server(stream: trio.abc.Stream) -> None:
        async with trio.open_nursery() as nursery:
            request = await trio_websocket.wrap_server_stream(nursery, stream)
            ws = await request.accept()
            while True:
                try:
                    message = await ws.get_message()
                except trio_websocket.ConnectionClosed:
                    return  # the relay closed: its block is over
                for line in str(message).splitlines():
                    frame = json.loads(line)
                    if frame["type"] == "hello":
                        descriptor = default_descriptor(str(frame["platform"]))
                        reply = {"type": "descriptor", "descriptor": descriptor}
                        await ws.send_message(json.dumps(reply) + "\n")
                    elif frame["type"] == "outbound":
                        results.append(str(frame["requestId"]))
                        reply = {
                            "type": "outbound_result",
                            "requestId": frame["requestId"],
                            "result": {"success": True, "message_id": "m1"},
                        }
                        await ws.send_message(json.dumps(reply) + "\n")
                    elif frame["type"] == "going_idle":  # the relay's block is ending
                        await ws.send_message('{"type": "going_idle_ack"}\n')

    async with trio.open_nursery() as nursery:
        dialer = FaultDialer(MemoryDialer(nursery, server))
        config = RelayConfig(dialer=dialer, close_timeout=0.5)
        async with trio_relay.open_relay("ws://127.0.0.1:1", config=config) as relay:
            await relay.wait_connected(5)
            direct = dialer.direct_writes
            outcome = await relay.request(SEND, timeout=5)
            assert outcome.success
            assert dialer.direct_writes == direct + 1
            assert len(results) == 1
        nursery.cancel_scope.cancel()


async def test_a_dialer_returning_a_stream_without_the_interface_is_told_what_it_lacks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dialer written for plain Trio streams (no ``send_nowait``, no ``close``): the
    first dial fails loudly, naming what is missing, instead of a request failing later
    on an ``AttributeError``."""
    opened: list[trio.SocketStream] = []

    async def plain_trio(endpoint: object) -> trio.SocketStream:
        stream = await trio.open_tcp_stream("127.0.0.1", connector.port)
        opened.append(stream)
        return stream

    async with open_connector() as connector:
        with pytest.raises(TypeError, match="lacks send_nowait, close") as info:
            async with trio_relay.open_relay(
                connector.url, config=RelayConfig(dialer=plain_trio)  # type: ignore[arg-type]
            ) as relay:
                await relay.wait_connected(5)
        assert "receive_some, send_all, send_nowait" in str(info.value)
        for stream in opened:
            await stream.aclose()
