"""Dedupe stores shared by replicas: real relays, the real reference connector, and a
real ``redis-server`` (see ``redis_support``) started per test on a free loopback port.

Real clock and real sockets; every test runs under a deadline.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import coredis
import pytest
import trio
from redis_support import RedisServer, redis_server, redis_server_with_password

from trio_relay import (
    DedupeStore,
    Identity,
    MemoryDedupeStore,
    MessageEvent,
    RedisDedupeStore,
    Relay,
    RelayConfig,
    UpgradeAuth,
    open_relay,
)
from trio_relay.testing import ReferenceConnector, open_connector

__all__ = ["redis_server", "redis_server_with_password"]  # fixtures used below

DEADLINE = 30.0
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05, "close_timeout": 0.2}
SECRETS = {"gw-a": "secret-a", "gw-b": "secret-b"}


def event(mid: str, chat: str = "C1") -> dict[str, Any]:
    return {"text": "hi", "message_id": mid,
            "source": {"platform": "slack", "chat_id": chat, "user_id": "U1"}}


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector(secrets=SECRETS) as c:
        yield c


@asynccontextmanager
async def replica(
    connector: ReferenceConnector,
    store: DedupeStore,
    on_message: Callable[[MessageEvent], Any],
    gateway: str = "gw-a",
    **config: Any,
) -> AsyncIterator[Relay]:
    async with open_relay(
        connector.url,
        identities=[Identity("slack", "B1")],
        auth=UpgradeAuth(gateway, SECRETS[gateway]),
        on_message=on_message,
        config=RelayConfig(**{**FAST, "dedupe_store": store, **config}),
    ) as relay:
        await relay.wait_connected(timeout=DEADLINE)
        yield relay


async def eventually(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await trio.sleep(0.01)


async def reconnect(connector: ReferenceConnector, relay: Relay) -> None:
    """Drop the connector's newest session (with one relay, that relay's) and wait for
    the next handshake, which replays whatever is still unacked."""
    sessions = connector.handshakes
    await connector.close(1011, "test drop")
    await connector.wait_session(sessions + 1)
    await relay.wait_connected(timeout=DEADLINE)


async def redis_keys(url: str) -> dict[str, bytes]:
    async with coredis.Redis.from_url(url, decode_components=True) as client:
        keys = await client.keys("*")
        return {k.decode(): (await client.get(k)) or b"" for k in keys}


# --- replicas sharing one store ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_two_relays_sharing_one_store_run_each_replayed_delivery_once(
    connector: ReferenceConnector, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        store: DedupeStore = RedisDedupeStore(server.url)
    else:
        store = MemoryDedupeStore()  # one instance, two relays in one process
    runs: Counter[str] = Counter()
    by: dict[str, set[str]] = {"one": set(), "two": set()}

    def handler(name: str) -> Callable[[MessageEvent], Any]:
        async def on_message(ev: MessageEvent) -> None:
            runs[ev.message_id or ""] += 1
            by[name].add(ev.message_id or "")
            await trio.sleep(0.01)  # long enough for the other replica's copy to arrive

        return on_message

    bids = [connector.buffer_inbound(event(f"m{i}", f"C{i % 5}"), gateway_id="gw-a")
            for i in range(40)]
    with trio.fail_after(DEADLINE):
        # Both handshakes replay all 40 buffered deliveries to both replicas.
        async with replica(connector, store, handler("one")) as one, \
                replica(connector, store, handler("two")) as two:
            await eventually(lambda: connector.pending("gw-a") == [])
            assert sorted(runs) == sorted(f"m{i}" for i in range(40))
            assert max(runs.values()) == 1
            assert one.stats.delivered + two.stats.delivered == 40
            assert set(connector.acks) >= set(bids)
            await reconnect(connector, two)  # the newest session: nothing left to replay
            await trio.sleep(0.1)
            assert sum(runs.values()) == 40


async def test_a_long_handler_keeps_its_claim_past_the_lease(
    connector: ReferenceConnector, redis_server: RedisServer
) -> None:
    store = RedisDedupeStore(redis_server.url, lease=0.6, timeout=0.2)
    release = trio.Event()
    runs: list[str] = []

    async def slow(ev: MessageEvent) -> None:
        runs.append("one")
        await release.wait()

    async def other(ev: MessageEvent) -> None:
        runs.append("two")

    with trio.fail_after(DEADLINE):
        async with replica(connector, store, slow) as one:
            connector.buffer_inbound(event("long"), gateway_id="gw-a")
            await eventually(lambda: runs == ["one"])
            await trio.sleep(1.5)  # 2.5 leases: renewed, not expired
            async with replica(connector, store, other) as two:  # its handshake replays it
                await eventually(lambda: two.stats.replays_dropped == 1)
                assert runs == ["one"]
                release.set()
                await eventually(lambda: connector.pending("gw-a") == [])
                assert one.stats.delivered == 1 and runs == ["one"]


# --- a replica that dies ------------------------------------------------------------------

_REPLICA = textwrap.dedent(
    """
    import sys, trio, trio_relay

    url, redis_url = sys.argv[1], sys.argv[2]

    async def on_message(event):
        print("handling", event.message_id, flush=True)
        await trio.sleep_forever()  # killed mid-handler

    async def main():
        store = trio_relay.RedisDedupeStore(redis_url, lease=float(sys.argv[3]))
        async with trio_relay.open_relay(
            url, identities=[trio_relay.Identity("slack", "B1")],
            auth=trio_relay.UpgradeAuth("gw-a", "secret-a"), on_message=on_message,
            config=trio_relay.RelayConfig(dedupe_store=store),
        ):
            await trio.sleep_forever()

    trio.run(main)
    """
)


async def test_a_replica_killed_mid_handler_holds_its_claim_until_the_lease_expires(
    connector: ReferenceConnector, redis_server: RedisServer
) -> None:
    lease = 4.0
    bid = connector.buffer_inbound(event("turn"), gateway_id="gw-a")
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", _REPLICA, connector.url, redis_server.url, str(lease)],
        stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        with trio.fail_after(DEADLINE):
            assert proc.stdout is not None
            line = b""
            while b"\n" not in line:
                line += await proc.stdout.receive_some(100)
            assert line.startswith(b"handling turn")
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            runs: list[str] = []

            async def on_message(ev: MessageEvent) -> None:
                runs.append(ev.message_id or "")

            key = "trio_relay:dedupe:{gw:gw-a}:slack:C1:turn"
            async with replica(connector, RedisDedupeStore(redis_server.url), on_message) as b:
                await eventually(lambda: b.stats.replays_dropped == 1)
                async with coredis.Redis.from_url(redis_server.url) as client:
                    left = await client.pttl(key)
                    # The dead replica's claim is still live: the copy was dropped, unacked.
                    assert left > 0, "machine too slow: the lease ran out before the check"
                    assert runs == [] and connector.pending("gw-a") == [bid]
                    while await client.pttl(key) > 0:
                        await trio.sleep(0.1)
                await reconnect(connector, b)  # the next replay finds the claim expired
                await eventually(lambda: connector.pending("gw-a") == [])
                assert runs == ["turn"]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# --- the store goes away and comes back -----------------------------------------------------


async def test_redis_stopped_and_restarted_mid_run(
    connector: ReferenceConnector, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[str] = []

    async def on_message(ev: MessageEvent) -> None:
        runs.append(ev.message_id or "")

    store = RedisDedupeStore(redis_server.url, timeout=0.2)
    with trio.fail_after(DEADLINE):
        async with replica(connector, store, on_message) as relay:
            connector.buffer_inbound(event("before"), gateway_id="gw-a")
            await eventually(lambda: runs == ["before"])
            redis_server.stop()
            for i in range(3):  # fail open: still handled, one log line for the outage
                connector.buffer_inbound(event(f"during{i}"), gateway_id="gw-a")
            await eventually(lambda: len(runs) == 4)
            assert relay.stats.dedupe_store_outages == 1
            assert relay.stats.dedupe_store_fail_open >= 1
            assert caplog.text.count("unavailable") == 1
            redis_server.start()  # empty: the server keeps nothing on disk here
            await eventually(lambda: "reachable again" in caplog.text)
            connector.buffer_inbound(event("after"), gateway_id="gw-a")
            await eventually(lambda: len(runs) == 5)
            await eventually(lambda: connector.pending("gw-a") == [])
            keys = await redis_keys(redis_server.url)
            # Commits kept through the outage were written once it was back.
            for mid in ("during0", "during1", "during2", "after"):
                assert keys[f"trio_relay:dedupe:{{gw:gw-a}}:slack:C1:{mid}"] == b"done"
            assert relay.stats.dedupe_store_outages == 1
            assert runs == ["before", "during0", "during1", "during2", "after"]


async def test_redis_down_when_the_relay_starts_still_runs_deliveries(
    connector: ReferenceConnector, redis_server: RedisServer
) -> None:
    redis_server.stop()
    runs: list[str] = []

    async def on_message(ev: MessageEvent) -> None:
        runs.append(ev.message_id or "")

    with trio.fail_after(DEADLINE):
        async with replica(
            connector, RedisDedupeStore(redis_server.url, timeout=0.2), on_message
        ) as relay:
            connector.buffer_inbound(event("m1"), gateway_id="gw-a")
            await eventually(lambda: runs == ["m1"])
            assert relay.stats.dedupe_store_outages == 1


# --- tenants ---------------------------------------------------------------------------------


async def test_a_key_space_shared_by_two_gateway_ids(
    connector: ReferenceConnector, redis_server: RedisServer
) -> None:
    runs: list[tuple[str, str]] = []

    def handler(gw: str) -> Callable[[MessageEvent], Any]:
        async def on_message(ev: MessageEvent) -> None:
            runs.append((gw, ev.message_id or ""))

        return on_message

    store = RedisDedupeStore(redis_server.url, prefix="shared:")
    with trio.fail_after(DEADLINE):
        async with replica(connector, store, handler("a"), gateway="gw-a"), \
                replica(connector, store, handler("b"), gateway="gw-b"):
            # The same chat and message id on two gateways: two tenants, two deliveries.
            connector.buffer_inbound(event("same"), gateway_id="gw-a")
            connector.buffer_inbound(event("same"), gateway_id="gw-b")
            await eventually(lambda: len(runs) == 2)
            assert sorted(runs) == [("a", "same"), ("b", "same")]
            await eventually(lambda: not connector.pending("gw-a") + connector.pending("gw-b"))
            keys = await redis_keys(redis_server.url)
            assert {k for k in keys if k.startswith("shared:")} == {
                "shared:{gw:gw-a}:slack:C1:same", "shared:{gw:gw-b}:slack:C1:same"
            }


# --- credentials ---------------------------------------------------------------------------


async def test_percent_encoded_password_is_decoded_and_never_shown(
    connector: ReferenceConnector, redis_server_with_password: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = redis_server_with_password
    password = server.password
    assert password is not None and "%" in server.url  # it needed encoding
    store = RedisDedupeStore(server.url, timeout=0.2)
    config = RelayConfig(dedupe_store=store)
    for shown in (repr(store), repr(config), str(store)):
        assert password not in shown and "***" in shown
    runs: list[str] = []

    async def on_message(ev: MessageEvent) -> None:
        runs.append(ev.message_id or "")

    with trio.fail_after(DEADLINE):
        async with replica(connector, store, on_message) as relay:
            connector.buffer_inbound(event("m1"), gateway_id="gw-a")
            await eventually(lambda: runs == ["m1"])
            assert relay.stats.dedupe_store_outages == 0  # authenticated
            server.stop()
            connector.buffer_inbound(event("m2"), gateway_id="gw-a")
            await eventually(lambda: runs == ["m1", "m2"])
    assert "unavailable" in caplog.text
    assert password not in caplog.text
    assert "secret-a" not in caplog.text


def test_store_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="redis://"):
        RedisDedupeStore("http://u:pw@host")
    with pytest.raises(ValueError) as info:
        RedisDedupeStore("https://user:hunter2@host")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="timeout must be shorter"):
        RedisDedupeStore("redis://host", lease=1, timeout=1)
    with pytest.raises(ValueError, match="ttl"):
        RedisDedupeStore("redis://host", ttl=0)
    with pytest.raises(ValueError, match="not both"):
        RelayConfig(dedupe_path="x", dedupe_store=MemoryDedupeStore())
