"""The relay's WebSocket through an HTTP CONNECT proxy on loopback (issue 11): chosen
from the environment (honouring ``NO_PROXY``) or ``RelayConfig(proxy=...)``.

What a scripted proxy shows best stays here (an answer no real proxy gives on demand,
the NO_PROXY table); the environment, the config, NO_PROXY, IPv6 and basic auth right,
missing and wrong run through real squid and tinyproxy in tests/edge/."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import trio
from relay_support import first_failed_dial
from upgrade_support import read_head

import trio_relay
from trio_relay import RelayConfig
from trio_relay._core.endpoint import Endpoint
from trio_relay._trio.link.proxy import bypassed, proxy_for
from trio_relay.testing import open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@dataclass
class Proxy:
    port: int
    answer: bytes = b"HTTP/1.1 200 Connection established\r\n\r\n"
    requests: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://user:pa%40ss@127.0.0.1:{self.port}"


async def _pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(sink)


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    state: list[Proxy] = []

    async def handle(client: trio.SocketStream) -> None:
        head = await read_head(client)
        if b"\r\n\r\n" not in head:
            return  # the client went away mid-request
        me = state[0]
        me.requests.append(head)
        if not me.answer.startswith(b"HTTP/1.1 200"):
            await client.send_all(me.answer)
            await client.aclose()
            return
        target = head.split(b" ")[1].decode()
        host, _, port = target.rpartition(":")
        upstream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        await client.send_all(me.answer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pipe, client, upstream)
            nursery.start_soon(_pipe, upstream, client)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), handle, 0
        )
        state.append(Proxy(listeners[0].socket.getsockname()[1]))
        yield state[0]
        nursery.cancel_scope.cancel()


async def _first_failed_dial(proxy_url: str) -> tuple[trio_relay.RelayStats, int]:
    """Dial through ``proxy_url`` until the first dial fails (the backoff keeps it to
    one); the relay's stats and how many handshakes the connector saw."""
    config = RelayConfig(
        proxy=proxy_url, backoff_initial=60.0, backoff_max=60.0, backoff_first_delay=60.0
    )
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, config=config) as relay,
    ):
        with trio.fail_after(10):
            while relay.stats.dial_failures < 1:
                await trio.sleep(0.01)
    return relay.stats, connector.handshakes


async def test_a_proxy_s_other_refusals_stay_quiet_at_first(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    proxy.answer = b"HTTP/1.1 502 Bad Gateway\r\n\r\n"
    await _first_failed_dial(f"http://127.0.0.1:{proxy.port}")
    [failed] = [r for r in caplog.records if "dial failed" in r.getMessage()]
    assert failed.levelno == logging.INFO
    assert "proxy credentials" not in failed.getMessage()


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "expected"),
    [
        ("api.example.com", 443, "example.com", True),
        ("api.example.com", 443, ".example.com", True),
        ("example.com", 443, ".example.com", True),
        ("badexample.com", 443, "example.com", False),
        ("example.com", 443, "example.com:8443", False),
        ("example.com", 8443, "example.com:8443", True),
        ("10.1.2.3", 443, "10.0.0.0/8", True),
        ("11.1.2.3", 443, "10.0.0.0/8", False),
        ("::1", 443, "::1", True),
        ("anything", 1, "*", True),
        ("anything", 1, "", False),
    ],
)
def test_no_proxy_matching(host: str, port: int, no_proxy: str, expected: bool) -> None:
    assert bypassed(host, port, no_proxy) is expected


def test_wss_reads_https_proxy_and_ws_reads_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("http_proxy", "http://plain-proxy:3128")
    secure = proxy_for(Endpoint("c.example", 443, True, "/relay"), True)
    plain = proxy_for(Endpoint("c.example", 80, False, "/relay"), True)
    assert secure is not None and secure.host == "secure-proxy"
    assert plain is not None and plain.host == "plain-proxy"
    assert proxy_for(Endpoint("c.example", 443, True, "/relay"), False) is None


# --- SOCKS5: what the CONNECT request names (the real proxy is in tests/edge/) -----------


async def _socks_request_for(scheme: str, url: str) -> tuple[bytes, str]:
    """The CONNECT request a relay to ``url`` sends a scripted SOCKS5 proxy (which then
    answers "connection refused"), and the relay's account of the failed dial."""
    requests: list[bytes] = []

    async def handle(client: trio.SocketStream) -> None:
        greeting = await client.receive_some(3)
        assert greeting == b"\x05\x01\x00"  # version 5, one method: no authentication
        await client.send_all(b"\x05\x00")
        request = b""
        while len(request) < 5 or len(request) < _socks_request_size(request):
            request += await client.receive_some(300)
        requests.append(request)
        await client.send_all(b"\x05\x05\x00\x01" + bytes(6))  # REP 5: connection refused

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), handle, 0
        )
        port = listeners[0].socket.getsockname()[1]
        stats = await first_failed_dial(url, f"{scheme}://127.0.0.1:{port}")
        nursery.cancel_scope.cancel()
    return requests[0], stats.last_dial_failure or ""


def _socks_request_size(request: bytes) -> int:
    kind = request[3]
    return {1: 4 + 4 + 2, 4: 4 + 16 + 2}.get(kind, 4 + 1 + request[4] + 2)


async def test_socks5h_sends_the_name_and_socks5_the_address_resolved_here() -> None:
    remote, cause = await _socks_request_for("socks5h", "ws://localhost:4567")
    assert remote == b"\x05\x01\x00\x03\x09localhost" + (4567).to_bytes(2, "big")
    assert "refused CONNECT to localhost:4567: connection refused" in cause, cause
    local, _ = await _socks_request_for("socks5", "ws://localhost:4567")
    assert local[:4] in (b"\x05\x01\x00\x01", b"\x05\x01\x00\x04")  # an address, no name
    assert local.endswith((4567).to_bytes(2, "big")) and b"localhost" not in local
