"""A ``stream_reply`` block cancelled from outside (a stopped turn, a deadline): the
``Cancelled`` comes out as itself. (A last send, edit or seal already out completes
within ``close_timeout``: ``test_stop_turn.py``.) Against the reference connector,
under ``MockClock``."""

from __future__ import annotations

import trio
import trio.testing
from live_support import live_relay

from trio_relay.testing import live_descriptor


async def test_a_cancelled_block_raises_cancelled_not_a_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    caught: list[BaseException] = []
    async with live_relay("slack", live_descriptor()) as (_connector, relay, _wire):
        with trio.move_on_after(1):
            try:
                async with relay.stream_reply("C1") as reply:
                    await reply.write("partial")
                    await trio.sleep(10)
            except BaseException as exc:
                caught.append(exc)
                raise
    assert [type(exc) for exc in caught] == [trio.Cancelled]
