"""Per-connection deadlines, end to end: each request times out at its own deadline,
whatever the mix of timeouts, although the connection's one timer was asleep until its
next ping when they were made. (The deadline rules themselves are tables on
``RelayProtocol``, in tests/core/test_protocol.py.)"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_relay
from trio_relay import RelayConfig
from trio_relay.testing import open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


async def test_mixed_timeouts_each_expire_at_their_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: dict[float, float] = {}
    async with open_connector() as connector:
        connector.drop_results()
        async with trio_relay.open_relay(
            connector.url, config=RelayConfig(close_timeout=0.2)
        ) as relay:
            await relay.wait_connected(5)
            start = trio.current_time()

            async def one(timeout: float) -> None:
                outcome = await relay.request(SEND, timeout=timeout)
                assert outcome.code == "timeout" and outcome.ambiguous
                ended[timeout] = trio.current_time() - start

            async with trio.open_nursery() as nursery:
                for timeout in (7.0, 1.0, 30.0, 3.5, 1.0005, 12.0):
                    nursery.start_soon(one, timeout)
    assert ended == pytest.approx({t: t for t in ended}, abs=0.002)
