"""A connector that closes in the same write as its ``101`` (a refusal after the
upgrade, e.g. 4401 for bad credentials): the relay's first read holds the answer and
the close frame together, so the socket is closing before a single hello is written.
The hellos must then wait for the writer (which sends nothing on a closing socket),
not be framed directly: framing a data frame on a closing WebSocket raises, and that
error used to escape ``open_relay``."""

from __future__ import annotations

import trio
from upgrade_support import accept_for, close_frame, read_head

import trio_relay
from trio_relay import RelayConfig


async def test_a_close_in_the_read_of_the_101_ends_the_link_without_raising() -> None:
    async def accept_then_close(stream: trio.SocketStream) -> None:
        head = await read_head(stream)
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
            + accept_for(head).encode()
            + b"\r\n\r\n"
            + close_frame(4401, b"unauthorized")
        )
        await trio.sleep(5)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, accept_then_close, 0)
        port = listeners[0].socket.getsockname()[1]
        config = RelayConfig(backoff_initial=0.2, backoff_max=0.2)
        # The real dialer: the direct write is only for plain TCP streams.
        async with trio_relay.open_relay(f"http://127.0.0.1:{port}", config=config) as relay:
            with trio.fail_after(20):
                # The supervisor lives on: it takes the refusal in and dials again.
                while relay.stats.dials < 2:
                    await trio.sleep(0.01)
            assert relay.stats.last_close_code == 4401
            assert relay.stats.last_close_reason == "unauthorized"
            assert relay.stats.connects == 0
        nursery.cancel_scope.cancel()
