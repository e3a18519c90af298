"""A stream wrapper that notes when the peer last sent us anything.

The pinger judges the link by *any* byte received — a frame, a pong, a ping — not
by pongs alone: a peer busy streaming results to us is plainly alive even if our ping's
answer is queued behind them. Wrapping the transport stream is the one place that sees
every byte, including the control frames trio-websocket handles internally.
"""

from __future__ import annotations

import trio


class LivenessStream(trio.abc.HalfCloseableStream):
    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.last_received = trio.current_time()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.last_received = trio.current_time()
        return data

    async def send_eof(self) -> None:
        if isinstance(self.inner, trio.abc.HalfCloseableStream):
            await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()
