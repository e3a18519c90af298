"""Inbound ordering and concurrency end to end, against the reference connector over
loopback: one chat in order while chats run in parallel, handlers that await replies
never deadlock the reader, and interrupts overtake a full queue.

Real clock (the sockets are real); every test runs under a deadline so a broken rule
fails instead of hanging.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import trio
from inbound_relay_support import DEADLINE, Handled, event, eventually, reconnect, relay_to

from trio_relay import Relay
from trio_relay._core.event import MessageEvent
from trio_relay.testing import ReferenceConnector, open_connector


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector() as c:
        yield c


# --- concurrency ----------------------------------------------------------------------


async def test_per_chat_order_under_concurrency(connector: ReferenceConnector) -> None:
    rng = random.Random(7)
    order: dict[str, list[int]] = {}
    active: set[str] = set()

    async def on_message(ev: MessageEvent) -> None:
        chat = ev.source.chat_id or ""
        assert chat not in active, "two handlers of one chat overlapped"
        active.add(chat)
        await trio.sleep(rng.random() * 0.01)
        order.setdefault(chat, []).append(int(ev.message_id or -1))
        active.discard(chat)

    with trio.fail_after(DEADLINE):
        async with relay_to(
            connector, on_message=on_message, config={"max_concurrent_handlers": 4}
        ):
            for n in range(10):
                for chat in ("A", "B", "C"):
                    connector.buffer_inbound(event(chat=chat, mid=n))
            await connector.wait_acks(30)
            assert order == {chat: list(range(10)) for chat in "ABC"}


async def test_handlers_awaiting_replies_never_deadlock(connector: ReferenceConnector) -> None:
    # Every handler slot is taken by a handler that sends and awaits the reply; more
    # messages keep arriving. The reply must still get through the reader.
    results: list[bool] = []
    relay_ref: list[Relay] = []

    async def on_message(ev: MessageEvent) -> None:
        out = await relay_ref[0].request({"op": "send", "chat_id": ev.source.chat_id,
                                          "content": f"re: {ev.text}"})
        results.append(out.success)

    connector.delay_results(0.02)  # so every slot is busy waiting at once
    with trio.fail_after(DEADLINE):
        async with relay_to(
            connector, on_message=on_message, config={"max_concurrent_handlers": 2}
        ) as relay:
            relay_ref.append(relay)
            for i in range(12):
                connector.buffer_inbound(event(chat=f"C{i}", mid="m"))
            await connector.wait_acks(12)
            assert results == [True] * 12


async def test_interrupt_overtakes_a_full_queue(connector: ReferenceConnector) -> None:
    handled = Handled()
    handled.gate = trio.Event()
    interrupts: list[tuple[str, str]] = []

    async def on_interrupt(session_key: str, chat_id: str) -> None:
        interrupts.append((session_key, chat_id))

    with trio.fail_after(DEADLINE):
        async with relay_to(
            connector, on_message=handled, on_interrupt=on_interrupt,
            config={"max_concurrent_handlers": 1, "max_inbound_queue": 3},
        ) as relay:
            connector.buffer_inbound(event(chat="C0", mid="m"))
            await handled.started.wait()  # running: no longer waiting in the queue
            for i in range(1, 6):
                connector.buffer_inbound(event(chat=f"C{i}", mid="m"))
            await eventually(lambda: relay.stats.inbound_dropped == 2)
            assert relay.stats.queue_depth == 3
            await connector.send_interrupt("S1", "C0")
            await eventually(lambda: interrupts == [("S1", "C0")])
            assert len(handled.events) == 1  # the message slot is still taken
            handled.gate.set()
            await connector.wait_acks(4)
            # The two refused without ack are still the connector's to redeliver.
            assert len(connector.pending()) == 2
            await reconnect(connector, relay)
            await connector.wait_acks(6)
            assert len(handled.events) == 6
