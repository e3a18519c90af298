"""RedisDedupeStore's connection to the server: TLS, a client you built, and a server
that stops answering (fail open within ``timeout``). A real ``redis-server`` per test
(see ``redis_support``); the real reference connector; real clock under deadlines.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from typing import Any

import coredis
import pytest
import trio
from redis_support import RedisServer, redis_server, redis_server_tls

from trio_relay import (
    Identity,
    MessageEvent,
    RedisDedupeStore,
    RelayConfig,
    UpgradeAuth,
    open_relay,
)
from trio_relay.testing import ReferenceConnector, open_connector

__all__ = ["redis_server", "redis_server_tls"]  # fixtures used below

DEADLINE = 30.0


def event(mid: str) -> dict[str, Any]:
    return {"text": "hi", "message_id": mid,
            "source": {"platform": "slack", "chat_id": "C1", "user_id": "U1"}}


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector(secrets={"gw-a": "secret-a"}) as c:
        yield c


async def run_deliveries(
    connector: ReferenceConnector, store: RedisDedupeStore, mids: list[str]
) -> tuple[list[str], Any]:
    runs: list[str] = []

    async def on_message(ev: MessageEvent) -> None:
        runs.append(ev.message_id or "")

    async with open_relay(
        connector.url, identities=[Identity("slack", "B1")],
        auth=UpgradeAuth("gw-a", "secret-a"), on_message=on_message,
        config=RelayConfig(dedupe_store=store, close_timeout=0.2),
    ) as relay:
        await relay.wait_connected(timeout=DEADLINE)
        for mid in mids:
            connector.buffer_inbound(event(mid), gateway_id="gw-a")
        while len(runs) < len(mids) or connector.pending("gw-a"):
            await trio.sleep(0.01)
        return runs, relay.stats


async def test_rediss_url_with_a_ca_and_a_password(
    connector: ReferenceConnector, redis_server_tls: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RedisDedupeStore(redis_server_tls.url, timeout=2.0)
    with trio.fail_after(DEADLINE):
        runs, stats = await run_deliveries(connector, store, ["m1", "m2"])
    assert runs == ["m1", "m2"] and stats.dedupe_store_outages == 0
    async with coredis.Redis.from_url(redis_server_tls.url, decode_components=True) as client:
        assert await client.get("trio_relay:dedupe:{gw:gw-a}:slack:C1:m1") == b"done"
    assert "tls-pw" not in caplog.text and "tls-pw" not in repr(store)


async def test_a_client_built_by_the_user(
    connector: ReferenceConnector, redis_server: RedisServer
) -> None:
    client = coredis.Redis(host="127.0.0.1", port=redis_server.port)
    store = RedisDedupeStore.from_client(client, prefix="mine:")
    assert repr(store) == "RedisDedupeStore('Redis', prefix='mine:')"
    with trio.fail_after(DEADLINE):
        runs, stats = await run_deliveries(connector, store, ["m1"])
    assert runs == ["m1"] and stats.dedupe_store_outages == 0
    async with coredis.Redis(host="127.0.0.1", port=redis_server.port) as check:
        assert await check.get("mine:{gw:gw-a}:slack:C1:m1") == b"done"


async def test_a_server_that_stops_answering_fails_open_within_the_timeout(
    connector: ReferenceConnector, redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "trio_relay")
    proc = redis_server.process
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)  # the socket stays open; nothing answers
    try:
        store = RedisDedupeStore(redis_server.url, timeout=0.3)
        with trio.fail_after(DEADLINE):
            runs, stats = await run_deliveries(connector, store, ["m1", "m2", "m3"])
        assert runs == ["m1", "m2", "m3"]
        assert stats.dedupe_store_outages == 1 and stats.dedupe_store_fail_open == 3
        assert caplog.text.count("unavailable") == 1
    finally:
        proc.send_signal(signal.SIGCONT)
