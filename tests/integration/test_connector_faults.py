"""The reference connector's faults, driven by a raw trio-websocket client.

Each fault it injects (malformed or raw frames, a close with a code, a TCP reset,
silence, a stop and restart on the same port) must look on the wire like the real
thing, and none may take the server down. Real loopback sockets throughout.
"""

from __future__ import annotations

import contextlib

import pytest
import trio
import trio.testing
from connector_support import dial, hello, line, outbound
from trio_websocket import HandshakeError

from trio_relay.testing import open_connector

# --- malformed frames ---------------------------------------------------------------


async def test_inject_raw_reaches_client_verbatim() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await connector.inject_raw('not json\n{"type":"descriptor"')
        assert await peer.ws.get_message() == 'not json\n{"type":"descriptor"'
        await connector.inject_raw(b"\x00binary")
        assert await peer.ws.get_message() == b"\x00binary"


async def test_malformed_client_frames_are_rejected_not_fatal() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.send("nope\n", "[1]\n", line({"type": "mystery"}), line({"type": "outbound"}))
        await connector.wait_until(lambda: len(connector.rejected) == 4)
        await peer.handshake()  # the session is still up
        assert connector.received[-1].TYPE == "hello"


# --- connection faults --------------------------------------------------------------


async def test_close_with_code() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        session = await connector.wait_session()
        await connector.close(1011, "overload")
        assert await peer.closed() == (1011, "overload")
        assert (session.close_code, session.close_reason) == (1011, "overload")
        assert connector.current is None and len(connector.kills) == 1


async def test_a_close_puts_its_frame_on_the_wire_though_a_ping_crosses_it() -> None:
    # trio-websocket answers a ping that arrives after our Close was framed with a Pong
    # wsproto refuses, and its reader's crash ends the session. Hold the Close behind a
    # long write (the gateway does not read), let a ping cross it, then read: the Close
    # frame must still follow the long message, never a bare EOF.
    async with open_connector() as connector, trio.open_nursery() as nursery:
        stream = await trio.open_tcp_stream("127.0.0.1", connector.port)
        await stream.send_all(
            b"GET /relay HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        wire = bytearray(await stream.receive_some())
        assert b" 101 " in wire
        await connector.wait_until(lambda: connector.current is not None)
        session = connector.current
        assert session is not None
        payload = b"x" * (8 << 20)  # more than both sockets' buffers can hold

        async def write_long() -> None:
            # Cut short (the socket closed under it) only when the Close was lost.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await connector.inject_raw(payload, session=session, as_text=True)

        nursery.start_soon(write_long)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(connector.close, 1011, "overload", session)
        await trio.testing.wait_all_tasks_blocked()  # the Close waits behind the write
        await stream.send_all(b"\x89\x80\x00\x00\x00\x00")  # a masked, empty Ping
        await trio.sleep(0.2)  # the connector's reader meets the ping
        with trio.fail_after(10):
            while data := await stream.receive_some(1 << 20):
                wire += data
        await stream.aclose()
        head_end = wire.index(b"\r\n\r\n") + 4
        long_end = head_end + 10 + len(payload)
        assert wire[head_end : head_end + 10] == b"\x81\x7f" + len(payload).to_bytes(8, "big")
        assert bytes(wire[long_end:]) == b"\x88\x0a" + (1011).to_bytes(2, "big") + b"overload"
        assert (session.close_code, session.close_reason) == (1011, "overload")


async def test_abort_resets_the_connection() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await connector.abort()
        assert (await peer.closed())[0] == 1006
        assert connector.sessions[0].close_reason == "aborted"


async def test_abort_is_a_tcp_reset_not_a_fin() -> None:
    # A hand-made upgrade on a bare TCP stream, to see the RST itself: a FIN would
    # read as b"", a reset raises.
    async with open_connector() as connector:
        stream = await trio.open_tcp_stream("127.0.0.1", connector.port)
        await stream.send_all(
            b"GET /relay HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        assert b" 101 " in await stream.receive_some()
        await connector.wait_until(lambda: connector.current is not None)
        await connector.abort()
        with pytest.raises(trio.BrokenResourceError):
            await stream.receive_some()
        await stream.aclose()


async def test_go_silent_stalls_pings_and_frames_then_resume() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        connector.go_silent()
        assert connector.current is not None and connector.current.silent
        await peer.send(outbound("held"))
        with trio.move_on_after(0.3) as stalled:
            await peer.ws.ping(b"p1")
        assert stalled.cancelled_caught
        assert connector.outbound_count == 0  # nothing read while silent
        connector.resume_session()
        with trio.fail_after(1):
            await peer.ws.ping(b"p2")
            assert (await peer.frame())["requestId"] == "held"


async def test_stop_and_start_on_the_same_port() -> None:
    async with open_connector() as connector:
        port = connector.port
        async with dial(connector) as peer:
            await peer.handshake()
            await connector.stop()
            assert (await peer.closed())[0] == 1006
        with pytest.raises(HandshakeError):
            async with dial(connector):
                pass  # pragma: no cover
        await connector.start()
        assert connector.port == port
        async with dial(connector) as peer:
            await peer.handshake()
            await connector.stop(abort=False)
            assert await peer.closed() == (1001, "going away")
        assert len(connector.kills) == 2


async def test_fault_without_session_raises() -> None:
    async with open_connector() as connector:
        with pytest.raises(RuntimeError, match="no open session"):
            await connector.abort()


async def test_client_close_recorded() -> None:
    async with open_connector() as connector:
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.ws.aclose(4000, "bye")
        session = connector.sessions[0]
        with trio.fail_after(1):
            await session.closed.wait()
        assert (session.close_code, session.close_reason) == (4000, "bye")


async def test_server_survives_broken_clients_and_a_crashing_session() -> None:
    # A descriptor that cannot be encoded makes that session's dispatch raise.
    async with open_connector(descriptors={"bad": {"x": {1, 2}}}) as connector:
        for junk in (b"garbage\r\n\r\n", b"GET /relay HTTP/1.1\r\n", b""):
            stream = await trio.open_tcp_stream("127.0.0.1", connector.port)
            await stream.send_all(junk)
            await stream.aclose()
        async with dial(connector) as peer:
            await peer.send(hello("bad"))
            assert (await peer.closed())[0] == 1006
        async with dial(connector) as peer:
            await peer.handshake("good")
        assert connector.listening
