"""A request on a stream that takes nothing at once (a full socket; here a test wrapper
whose writes are held, as a full socket holds them) keeps its own deadline: its direct
write (``send_nowait``) takes nothing, so its frame goes to the writer task, which may
block, while the request's task only waits for its outcome. It used to write the frame
itself and block in that write, so its timeout came only when the link was declared
stalled (``ping_timeout`` later)."""

from __future__ import annotations

import trio
import trio.testing

import trio_relay
from trio_relay import RelayConfig
from trio_relay.testing import FaultDialer, open_connector

SEND = {"op": "send", "chat_id": "C", "content": "hi"}


async def test_a_request_whose_write_is_held_times_out_at_its_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dialer = FaultDialer()
    config = RelayConfig(dialer=dialer, ping_interval=10, ping_timeout=40, close_timeout=0.2)
    async with open_connector() as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        dialer.hold_writes()
        started = trio.current_time()
        with trio.fail_after(10):  # mock time: well before the stall detector's 40 s
            outcome = await relay.request(SEND, timeout=1.0)
        assert trio.current_time() - started == 1.0
        assert outcome.code == "timeout"
        assert outcome.ambiguous  # its write had begun: the connector may yet get it
        dialer.release_writes()
        assert (await relay.request(SEND, timeout=5.0)).success
