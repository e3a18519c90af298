"""Per-connection deadlines (trio_relay._trio.connection.waiters): each request times out at its own
deadline, whatever the mix of timeouts, and answered requests do not pile up."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_relay
from trio_relay import Outcome, RelayConfig
from trio_relay._trio.connection.waiters import Expiry, Waiter
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


async def test_answered_requests_leave_the_deadline_groups() -> None:
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=RelayConfig(close_timeout=0.2)) as relay,
    ):
        await relay.wait_connected(5)
        async with trio.open_nursery() as nursery:
            for _ in range(2000):
                nursery.start_soon(relay.request, SEND)
        conn = relay._conn
        assert conn is not None
        groups = conn._expiry._groups  # answered requests are pruned as results arrive
        assert sum(len(group) for group in groups.values()) < 50


async def test_a_waiter_resolved_before_it_waits_returns_at_once() -> None:
    waiter = Waiter("r1", b"line\n", deadline=trio.current_time() + 5, timeout=5)
    waiter.resolve(Outcome(success=True))
    waiter.resolve(Outcome(success=False))  # the first outcome is the only one
    assert (await waiter.wait()).success


async def test_expiry_fires_in_deadline_order(autojump_clock: trio.testing.MockClock) -> None:
    expired: list[tuple[str, float]] = []
    expiry = Expiry(lambda w: expired.append((w.request_id, trio.current_time())))
    now = trio.current_time()
    waiters = [Waiter(f"r{t}", b"", now + t, t) for t in (3.0, 1.0, 2.0)]
    for waiter in waiters:
        expiry.add(waiter)
    waiters[2].resolve(Outcome(success=True))  # answered: never expires
    # The connection's timer loop, with nothing else to wake it (no ping due).
    while trio.current_time() < now + 10:
        with expiry.sleep_scope(now + 10):
            await trio.sleep_forever()
        expiry.expire_due()
    assert expired == [("r1.0", now + 1.0), ("r3.0", now + 3.0)]


async def test_a_waiter_added_during_the_sleep_shortens_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    expired: list[float] = []
    expiry = Expiry(lambda w: expired.append(trio.current_time()))
    now = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def add_later() -> None:
            await trio.sleep(1.0)
            expiry.add(Waiter("r", b"", trio.current_time() + 2.0, 2.0))

        nursery.start_soon(add_later)
        with expiry.sleep_scope(now + 100):
            await trio.sleep_forever()
        expiry.expire_due()
    assert expired == [now + 3.0]
