"""The relay's WebSocket through real CONNECT proxies (issue 23): squid and tinyproxy,
with and without basic auth, chosen by the environment or by ``RelayConfig(proxy=)``.

An IPv4 proxy of the tier dials out from 127.0.0.2 (edge_servers.PROXY_SOURCE): the
connector sees that address as the gateway's when the link went through the proxy."""

from __future__ import annotations

import logging
import ssl
from urllib.parse import quote

import pytest
from edge_servers import PROXY_SOURCE, Edge, NginxSettings, quick
from relay_support import first_failed_dial

import trio_relay
from trio_relay.testing import open_connector

pytestmark = pytest.mark.edge

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}
PROXIES = ["squid", "tinyproxy"]
USER = "relay"
PASSWORDS = {"squid": "pa@ss-edge", "tinyproxy": "pass-edge"}
"""squid's password file takes an ``@`` (sent percent-encoded in the URL); tinyproxy's
config grammar takes letters, digits and dashes only."""


PROXY_AUTH = "407 Proxy Authentication Required"
REFUSAL = {
    ("squid", "missing"): PROXY_AUTH,
    ("squid", "wrong"): PROXY_AUTH,
    ("tinyproxy", "missing"): PROXY_AUTH,
    ("tinyproxy", "wrong"): "401 Unauthorized",
}
"""How each answers a CONNECT with missing or wrong credentials (tinyproxy says 401 to
a wrong password: both must warn at once)."""


def credentials(kind: str) -> tuple[str, str]:
    return USER, PASSWORDS[kind]


def encoded(kind: str) -> str:
    return quote(PASSWORDS[kind], safe="")


@pytest.mark.parametrize("kind", PROXIES)
async def test_the_environment_s_proxy_carries_the_websocket(
    edge: Edge, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = edge.proxy(kind, credentials=credentials(kind))
    monkeypatch.setenv("HTTP_PROXY", proxy.url(USER, encoded(kind)))  # percent-encoded @
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(10)
        assert (await relay.request(SEND)).success
        assert connector.sessions[0].peer[0] == PROXY_SOURCE


@pytest.mark.parametrize("kind", PROXIES)
async def test_a_configured_proxy_wins_over_the_environment(
    edge: Edge, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = edge.proxy(kind)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: nothing there
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=quick(proxy=proxy.url())) as relay,
    ):
        await relay.wait_connected(10)
        assert connector.sessions[0].peer[0] == PROXY_SOURCE
    assert relay.stats.dial_failures == 0


async def test_no_proxy_and_proxy_false_dial_directly(
    edge: Edge, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = edge.proxy("tinyproxy")
    monkeypatch.setenv("ALL_PROXY", proxy.url())
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.0/8")
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(10)
        assert connector.sessions[0].peer[0] == "127.0.0.1"
    monkeypatch.delenv("NO_PROXY")
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=quick(proxy=False)) as relay,
    ):
        await relay.wait_connected(10)
        assert connector.sessions[0].peer[0] == "127.0.0.1"


@pytest.mark.parametrize("kind", PROXIES)
async def test_wss_through_the_proxy_and_a_tls_front(
    edge: Edge, kind: str, client_context: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = edge.proxy(kind, credentials=credentials(kind))
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port))
        # wss reads HTTPS_PROXY; TLS to the front runs inside the tunnel.
        monkeypatch.setenv("HTTPS_PROXY", proxy.url(USER, encoded(kind)))
        config = quick(ssl_context=client_context)
        async with trio_relay.open_relay(nginx.url, config=config) as relay:
            await relay.wait_connected(10)
            assert (await relay.request(SEND)).success
    assert relay.stats.dial_failures == 0


@pytest.mark.parametrize("kind", PROXIES)
async def test_an_ipv6_proxy_to_an_ipv6_connector(
    edge: Edge, ipv6_loopback: str, kind: str
) -> None:
    proxy = edge.proxy(kind, host=ipv6_loopback, credentials=credentials(kind))
    async with open_connector(host=ipv6_loopback) as connector:
        wrong = await first_failed_dial(connector.url, proxy.url(USER, "nope"))
        # The proxy was asked (over IPv6): it refused the credentials.
        cause = wrong.last_dial_failure or ""
        assert REFUSAL[kind, "wrong"] in cause, cause
        assert f"proxy http://[::1]:{proxy.port} refused" in cause, cause  # bracketed
        config = quick(proxy=proxy.url(USER, encoded(kind)))
        async with trio_relay.open_relay(connector.url, config=config) as relay:
            await relay.wait_connected(10)
            assert (await relay.request(SEND)).success


@pytest.mark.parametrize("kind", PROXIES)
@pytest.mark.parametrize("password", [None, "wrong-pw"], ids=["missing", "wrong"])
async def test_refused_proxy_credentials_warn_at_once_without_the_password(
    edge: Edge, kind: str, password: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_relay")
    proxy = edge.proxy(kind, credentials=credentials(kind))
    proxy_url = proxy.url(USER, password) if password else proxy.url()
    async with open_connector() as connector:
        stats = await first_failed_dial(connector.url, proxy_url)
        assert connector.handshakes == 0
    cause = stats.last_dial_failure or ""
    case = "missing" if password is None else "wrong"
    assert "refused CONNECT" in cause and REFUSAL[kind, case] in cause, cause
    failed = [r for r in caplog.records if "dial failed" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in caplog.records]
    assert failed[0].levelno == logging.WARNING  # the first failure, not the sixth
    assert "check the proxy credentials" in failed[0].getMessage()
    everything = " ".join(r.getMessage() for r in caplog.records) + repr(stats)
    assert "wrong-pw" not in everything and PASSWORDS[kind] not in everything
