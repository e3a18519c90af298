"""Idle cuts by a real front (issue 23, item 3): nginx's ``proxy_read_timeout`` cuts a
WebSocket that carried nothing from the connector for that long. Below the ping
interval it cuts every link until the relay learns it and pings faster; above it, the
pings keep the link busy and nothing is cut."""

from __future__ import annotations

import logging
import ssl

import pytest
import trio
from edge_servers import Edge, NginxSettings

import trio_relay
from trio_relay import RelayConfig, State
from trio_relay.testing import open_connector

pytestmark = pytest.mark.edge

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


def redials(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The waits logged after each lost link ("link lost: ...; next attempt in D s")."""
    said = [r.getMessage() for r in caplog.records if "link lost" in r.getMessage()]
    return [line.rsplit("next attempt in ", 1)[1] for line in said]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("trio_relay") and r.levelno >= logging.WARNING
    ]


async def connected_share(relay: trio_relay.Relay, seconds: float) -> float:
    """The share of ``seconds`` the relay spent connected, sampled every 50 ms."""
    samples = connected = 0
    with trio.move_on_after(seconds):
        while True:
            samples += 1
            connected += relay.state is State.CONNECTED
            await trio.sleep(0.05)
    return connected / max(samples, 1)


@pytest.mark.slow
async def test_a_3_s_idle_cut_is_learned_and_the_link_then_stays_up(
    edge: Edge, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    # The acceptance test: the default 10 s pings behind nginx's 3 s read
    # timeout; connected >= 95% of 30 s once adapted, and exactly one WARNING.
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port, read_timeout=3.0))
        config = RelayConfig(ssl_context=client_context, close_timeout=0.2)
        async with trio_relay.open_relay(nginx.url, config=config) as relay:
            with trio.fail_after(20):  # two 3 s links and a ladder step between them
                while relay.stats.idle_cut_detected is None:
                    await trio.sleep(0.05)
            await relay.wait_connected(5)
            drops = sum(relay.stats.drops.values())
            share = await connected_share(relay, 30.0)
            assert (await relay.request(SEND)).success
            assert sum(relay.stats.drops.values()) == drops  # no cut since
    assert share >= 0.95, share
    cut = relay.stats.idle_cut_detected
    assert cut is not None and 2.8 <= cut <= 3.5, cut
    assert relay.stats.effective_ping_interval == pytest.approx(cut / 2)
    [warning] = warnings_of(caplog)
    assert "cuts connections idle for ~3" in warning, warning
    assert "set ping_interval below it" in warning
    assert connector.handshakes == 3  # two cut links, then the one that stays
    # The first cut climbs a rung (0.5 to 1 s); the one that taught the cut is explained,
    # so its redial is the one after a healthy link: at once.
    first, second = redials(caplog)
    assert first != "0 s" and second == "0 s", (first, second)


async def test_an_idle_timeout_above_the_ping_interval_cuts_nothing(
    edge: Edge, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port, read_timeout=2.0))
        config = RelayConfig(
            ssl_context=client_context, close_timeout=0.2, ping_interval=1.0, ping_timeout=5.0
        )
        async with trio_relay.open_relay(nginx.url, config=config) as relay:
            await relay.wait_connected(10)
            await trio.sleep(5.0)  # 2.5 idle timeouts: the pongs keep the link busy
            assert relay.state is State.CONNECTED
            assert (await relay.request(SEND)).success
    assert sum(relay.stats.drops.values()) == 0 and connector.handshakes == 1
    assert relay.stats.idle_cut_detected is None
    assert relay.stats.effective_ping_interval == 1.0
    assert warnings_of(caplog) == []


async def test_without_adapting_it_warns_and_keeps_the_interval(
    edge: Edge, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port, read_timeout=1.2))
        config = RelayConfig(
            ssl_context=client_context, close_timeout=0.2, adapt_ping_interval=False
        )
        async with trio_relay.open_relay(nginx.url, config=config) as relay:
            with trio.fail_after(15):
                while relay.stats.idle_cut_detected is None:
                    await trio.sleep(0.05)
    assert relay.stats.effective_ping_interval == 10.0
    [warning] = warnings_of(caplog)
    assert "idle for ~1.2 s" in warning and "adapt_ping_interval is off" in warning, warning
    assert all(wait != "0 s" for wait in redials(caplog))  # not adapting: the ladder as ever
