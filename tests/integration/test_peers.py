"""The peer clients the benchmarks hold trio_relay to (benchmarks/peers.py), and the
Trio floor client (benchmarks/floor_client.py) where ``bench inflight`` uses it.

Their figures only mean something if they do the relay's job: the ``hello`` /
``descriptor`` handshake, one ``outbound`` per request matched to its own result, and
an honest outcome when the connection dies under a request. Checked here against the
reference connector on loopback, for each; no timings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from trio_relay_benchmarks._backends import Client, running
from trio_relay_benchmarks.floor_client import NAME as FLOOR
from trio_relay_benchmarks.floor_client import FloorClient
from trio_relay_benchmarks.peers import PEERS, open_peer

from trio_relay.testing import open_connector

N_TASKS = 8
PER_TASK = 25


@asynccontextmanager
async def open_client(name: str, url: str) -> AsyncIterator[Client]:
    if name == FLOOR:
        async with running(FloorClient(url)) as client:
            yield client
    else:
        async with open_peer(name, url) as peer:
            yield peer


@pytest.mark.parametrize("name", list(PEERS))
async def test_peer_completes_every_request_with_its_own_result(name: str) -> None:
    async with open_connector() as connector, open_peer(name, connector.url) as client:
        await client.wait_connected(10)
        session = await connector.wait_session()
        assert [hello.platform for hello in session.hellos] == ["relay"]
        replies = []

        async def requester(task: int) -> None:
            for i in range(PER_TASK):
                action = {"op": "send", "chat_id": f"c{task}", "content": f"t{task} m{i}"}
                replies.append(await client.request(action, 10))

        async with trio.open_nursery() as nursery:
            for task in range(N_TASKS):
                nursery.start_soon(requester, task)

        assert len(replies) == N_TASKS * PER_TASK
        assert all(r.success and not r.ambiguous for r in replies), replies
        assert connector.outbound_count == N_TASKS * PER_TASK
        # Each request went out with an id of its own, in its own frame.
        ids = [frame.request_id for frame in connector.outbound]
        assert len(set(ids)) == len(ids)
        # Requests of one task reached its chat in order (each waited for the last).
        assert [entry.text for entry in connector.transcript("c3")][:3] == [
            "t3 m0",
            "t3 m1",
            "t3 m2",
        ]


@pytest.mark.parametrize("name", [*PEERS, FLOOR])
async def test_in_flight_requests_end_ambiguous_and_the_client_redials(name: str) -> None:
    # (The floor client only since bench inflight used it: it dialled once before.)
    async with open_connector() as connector, open_client(name, connector.url) as client:
        await client.wait_connected(10)
        connector.withhold_results()
        replies = []

        async def requester() -> None:
            replies.append(await client.request({"op": "typing", "chat_id": "c"}, 10))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(requester)
            await connector.wait_outbound(5)
            await connector.abort()

        assert len(replies) == 5
        assert all(not r.success and r.ambiguous for r in replies), replies
        connector.release_results()
        await connector.wait_session(2)
        await client.wait_connected(10)
        reply = await client.request({"op": "typing", "chat_id": "c"}, 10)
        assert reply.success and not reply.ambiguous
        assert client.connects == 2 and client.drops == 1

