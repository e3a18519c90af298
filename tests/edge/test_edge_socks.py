"""The relay's WebSocket through a real SOCKS5 proxy (issue 23, item 4): microsocks,
with RFC 1929 username/password, as ``socks5://`` and ``socks5h://`` in
``RelayConfig(proxy=)`` and ``ALL_PROXY``.

microsocks dials out from 127.0.0.2 (edge_servers.PROXY_SOURCE): the connector sees that
address as the gateway's when the link went through the proxy."""

from __future__ import annotations

import logging
import ssl

import pytest
from edge_servers import PROXY_SOURCE, Edge, NginxSettings, quick
from relay_support import first_failed_dial

import trio_relay
from trio_relay.testing import open_connector

pytestmark = pytest.mark.edge

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}
USER, PASSWORD = "relay", "s0cks-secret"
CREDENTIALS = (USER, PASSWORD)


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
async def test_a_configured_socks5_proxy_carries_the_websocket(edge: Edge, scheme: str) -> None:
    proxy = edge.proxy("microsocks", credentials=CREDENTIALS)
    config = quick(proxy=proxy.url(USER, PASSWORD, scheme=scheme))
    assert PASSWORD not in repr(config)
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(10)
        assert (await relay.request(SEND)).success
        assert connector.sessions[0].peer[0] == PROXY_SOURCE
    assert relay.stats.dial_failures == 0


async def test_all_proxy_names_a_socks5h_proxy(
    edge: Edge, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = edge.proxy("microsocks", credentials=CREDENTIALS)
    monkeypatch.setenv("ALL_PROXY", proxy.url(USER, PASSWORD, scheme="socks5h"))
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(10)
        assert connector.sessions[0].peer[0] == PROXY_SOURCE


async def test_wss_through_socks5_and_a_tls_front(
    edge: Edge, client_context: ssl.SSLContext
) -> None:
    proxy = edge.proxy("microsocks", credentials=CREDENTIALS)
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port))
        config = quick(
            ssl_context=client_context, proxy=proxy.url(USER, PASSWORD, scheme="socks5h")
        )
        async with trio_relay.open_relay(nginx.url, config=config) as relay:
            await relay.wait_connected(10)
            assert (await relay.request(SEND)).success


async def test_an_ipv6_socks5_proxy(edge: Edge, ipv6_loopback: str) -> None:
    proxy = edge.proxy("microsocks", host=ipv6_loopback, credentials=CREDENTIALS)
    config = quick(proxy=proxy.url(USER, PASSWORD, scheme="socks5"))
    async with (
        open_connector(host=ipv6_loopback) as connector,
        trio_relay.open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(10)
        assert (await relay.request(SEND)).success


@pytest.mark.parametrize(
    ("password", "said"),
    [
        ("wrong-pw", "refused the username and password"),
        (None, "requires a username and password"),
    ],
    ids=["wrong", "missing"],
)
async def test_refused_socks5_credentials_warn_at_once_without_the_password(
    edge: Edge, password: str | None, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_relay")
    proxy = edge.proxy("microsocks", credentials=CREDENTIALS)
    url = proxy.url(USER, password, scheme="socks5h") if password else proxy.url(scheme="socks5h")
    async with open_connector() as connector:
        stats = await first_failed_dial(connector.url, url)
        assert connector.handshakes == 0
    cause = stats.last_dial_failure or ""
    assert f"SOCKS5 proxy socks5h://127.0.0.1:{proxy.port} {said}" in cause, cause
    failed = [r for r in caplog.records if "dial failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.WARNING, failed
    assert "check the proxy credentials" in failed[0].getMessage()
    everything = " ".join(r.getMessage() for r in caplog.records) + repr(stats)
    assert "wrong-pw" not in everything and PASSWORD not in everything
