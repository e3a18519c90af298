"""The keepalive clients of both families (``trio_relay.http`` for httpx2,
``trio_relay.http.httpx1`` for httpx 0.28) against real servers and a real proxy on
127.0.0.1. Options are read back from the *client's* connected socket."""

from __future__ import annotations

import copy
import importlib.metadata
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
import trio
from http_servers import (
    PROXY_VARIABLES,
    SSE_EVENTS,
    TCP,
    client_socket,
    keepalive_options,
    serve_origin,
    serve_proxy,
    tls_pair,
)

import trio_relay.http
import trio_relay.http.httpx1
from trio_relay import KeepaliveConfig
from trio_relay.http import stall_timeout

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads Linux TCP options")

# Far from the kernel defaults (7200/75/9, keepalive off): a match proves they were set.
CONFIG = KeepaliveConfig(idle=7, interval=3, count=4)
EXPECTED_OPTIONS = {"keepalive": 1, "idle": 7, "interval": 3, "count": 4, "user_timeout": 19_000}


@dataclass(frozen=True)
class Family:
    name: str
    api: ModuleType
    """The trio_relay module with the functions of this family."""
    httpx: ModuleType
    proxy_pools_pass_socket_options: bool
    """Whether this family's httpcore, as installed, hands ``socket_options=`` on to the
    connections its proxy pools open (httpcore2 2.17.0 does, "Fixed": #1172; httpcore 1
    does not, up to 1.0.9 at least)."""


def _release(distribution: str) -> tuple[int, ...]:
    parts = importlib.metadata.version(distribution).split(".")[:2]
    return tuple(int(part) for part in parts if part.isdigit())


FAMILIES = [
    Family("httpx2", trio_relay.http, httpx2, _release("httpcore2") >= (2, 17)),
    Family("httpx", trio_relay.http.httpx1, httpx, False),
]


@pytest.fixture(params=FAMILIES, ids=[f.name for f in FAMILIES])
def family(request: pytest.FixtureRequest) -> Family:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The machine's own proxy settings must not leak into tests of proxy handling.
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def origin() -> Iterator[str]:
    with serve_origin() as url:
        yield url


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    with serve_proxy() as served:
        yield served


@pytest.fixture(scope="module")
def tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    return tls_pair()


# --- each family returns its own client classes ------------------------------------------


def test_each_family_returns_its_own_classes(family: Family) -> None:
    api, module = family.api, family.httpx
    for build, expected in [
        (api.keepalive_client, module.AsyncClient),
        (api.keepalive_sync_client, module.Client),
        (api.llm_client, module.AsyncClient),
        (api.llm_sync_client, module.Client),
    ]:
        client = build()
        assert type(client) is expected, build
        if build in (api.llm_client, api.llm_sync_client):
            assert client.timeout == module.Timeout(connect=10, read=None, write=30, pool=30)


def test_llm_client_refuses_a_whole_request_timeout(family: Family) -> None:
    with pytest.raises(TypeError, match="never read"):
        family.api.llm_client(timeout=5)


async def test_llm_client_streams_longer_than_a_read_timeout_would_allow(
    family: Family, autojump_clock: trio.testing.MockClock
) -> None:
    # The read timeout is absent, not just long: a transport that takes a minute of mock
    # time per chunk still streams. (Mock transport: the timeout is httpx's own check.)
    async def slow_chunks() -> AsyncIterator[bytes]:
        for number in range(3):
            await trio.sleep(60)
            yield b"data: %d\n\n" % number

    async def handler(request: Any) -> Any:
        assert request.extensions["timeout"]["read"] is None
        return family.httpx.Response(200, content=slow_chunks())

    transport = family.httpx.MockTransport(handler)
    async with (
        family.api.llm_client(transport=transport) as client,
        client.stream("GET", "http://provider.invalid/") as response,
    ):
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert trio.current_time() == 180


# --- the options are on the connected socket ---------------------------------------------


async def test_async_client_socket_carries_the_options(family: Family, origin: str) -> None:
    async with (
        family.api.keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
        assert client_socket(response).getsockopt(TCP, socket.TCP_NODELAY) != 0


async def test_default_config_is_applied_when_none_is_given(family: Family, origin: str) -> None:
    async with family.api.keepalive_client() as client, client.stream("GET", origin) as response:
        options = keepalive_options(client_socket(response))
    assert options == {"keepalive": 1, "idle": 30, "interval": 10, "count": 3,
                       "user_timeout": 60_000}  # fmt: skip


async def test_plain_httpx_lacks_the_options(family: Family, origin: str) -> None:
    # The control: what the read-back shows without this module.
    async with family.httpx.AsyncClient() as client, client.stream("GET", origin) as response:
        assert keepalive_options(client_socket(response))["keepalive"] == 0


async def test_disabled_config_sets_no_keepalive(family: Family, origin: str) -> None:
    async with (
        family.api.keepalive_client(keepalive=KeepaliveConfig.disabled()) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response))["keepalive"] == 0


def test_sync_client_socket_carries_the_options(family: Family, origin: str) -> None:
    with (
        family.api.keepalive_sync_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
        assert response.read() == b"hello -"


# --- the caller's kwargs ----------------------------------------------------------------


async def test_kwargs_are_never_mutated_and_can_build_many_clients(family: Family,
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)  # so environment mounts get built too
    kwargs: dict[str, Any] = {
        "headers": {"x-test": "kept"},
        "params": {"q": ["a", "b"]},
        "mounts": {"http://unused.invalid": None},
        "event_hooks": {"request": []},
        "timeout": 10.0,
        "limits": family.httpx.Limits(max_connections=5),
    }
    snapshot = copy.deepcopy(kwargs)
    for attempt in range(3):
        async with family.api.keepalive_client(keepalive=CONFIG, **kwargs) as client:
            response = await client.get(origin)
            assert response.text == "hello kept", f"client {attempt + 1} of 3"
        assert kwargs == snapshot
    assert len(seen) == 3  # each went through the proxy built from the environment


# --- proxies ----------------------------------------------------------------------------


async def test_http_proxy_from_environment_is_used_with_the_options(family: Family,
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    async with (
        family.api.keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", f"{origin}/hello") as response,
    ):
        sock = client_socket(response)
        assert sock.getpeername()[1] == urlsplit(proxy_url).port  # to the proxy
        assert keepalive_options(sock) == EXPECTED_OPTIONS
        assert (await response.aread()) == b"hello -"
    assert seen == [f"GET {origin}/hello"]


async def test_https_proxy_from_environment_tunnels_with_the_options(family: Family,
    proxy: tuple[str, list[str]],
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server_tls, client_tls = tls
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTPS_PROXY", proxy_url)
    with serve_origin(server_tls) as origin:
        # verify= must reach the proxy transport, or the handshake fails.
        async with (
            family.api.keepalive_client(keepalive=CONFIG, verify=client_tls) as client,
            client.stream("GET", origin) as response,
        ):
            sock = client_socket(response)
            assert sock.getpeername()[1] == urlsplit(proxy_url).port
            assert keepalive_options(sock) == EXPECTED_OPTIONS
            assert (await response.aread()) == b"hello -"
    assert seen == [f"CONNECT {urlsplit(origin).netloc}"]


async def test_explicit_proxy_argument_carries_the_options(family: Family,
    origin: str, proxy: tuple[str, list[str]]
) -> None:
    proxy_url, seen = proxy
    async with (
        family.api.keepalive_client(keepalive=CONFIG, proxy=proxy_url, trust_env=False) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
    assert len(seen) == 1


@pytest.mark.parametrize(
    "environment",
    [{"NO_PROXY": "127.0.0.1"}, {"no_proxy": "localhost, 127.0.0.1"}, {"NO_PROXY": "*"}],
)
async def test_no_proxy_is_respected(family: Family,
    origin: str,
    proxy: tuple[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    async with (
        family.api.keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
    assert seen == []


async def test_trust_env_false_ignores_environment_proxies(family: Family,
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    async with family.api.keepalive_client(trust_env=False) as client:
        assert (await client.get(origin)).status_code == 200
    assert seen == []


async def test_explicit_transport_and_mounts_are_respected(family: Family,
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)

    def answer(text: str) -> Any:
        return family.httpx.MockTransport(lambda request: family.httpx.Response(200, text=text))

    async with family.api.keepalive_client(transport=answer("caller transport")) as client:
        assert (await client.get(origin)).text == "caller transport"
    # Same pattern as the environment's HTTP_PROXY mount: the caller's must win.
    async with family.api.keepalive_client(mounts={"http://": answer("caller mount")}) as client:
        assert (await client.get(origin)).text == "caller mount"
    assert seen == []


# --- streams ----------------------------------------------------------------------------


async def test_chunked_event_stream_arrives_whole(family: Family, origin: str) -> None:
    received: list[str] = []
    async with (
        family.api.keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", f"{origin}/sse") as response,
    ):
        lines = stall_timeout(response.aiter_lines(), 5)
        async with aclosing(lines):
            received = [line async for line in lines if line]
    assert received == [f"data: {number}" for number in range(SSE_EVENTS)]


async def test_plain_transport_through_a_proxy_keeps_socket_options_as_its_httpcore_does(
    family: Family, origin: str, proxy: tuple[str, list[str]]
) -> None:
    # The control for the proxy tests above: httpcore 1 and httpcore2 before 2.17 drop
    # socket_options= on proxied connections, which is why the keepalive clients add them
    # in the network backend (and still do: their floor of httpcore2 is 2.12). Should the
    # installed httpcore change its behaviour either way, this says so.
    proxy_url, seen = proxy
    transport = family.httpx.AsyncHTTPTransport(
        socket_options=CONFIG.socket_options(), proxy=proxy_url
    )
    async with (
        family.httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", origin) as response,
    ):
        keepalive = keepalive_options(client_socket(response))["keepalive"]
    assert keepalive == (1 if family.proxy_pools_pass_socket_options else 0)
    assert len(seen) == 1


def test_sync_client_through_a_proxy_carries_the_options(
    family: Family, origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    with (
        family.api.keepalive_sync_client(keepalive=CONFIG) as client,
        client.stream("GET", f"{origin}/hello") as response,
    ):
        sock = client_socket(response)
        assert sock.getpeername()[1] == urlsplit(proxy_url).port
        assert keepalive_options(sock) == EXPECTED_OPTIONS
        assert response.read() == b"hello -"
    assert seen == [f"GET {origin}/hello"]


async def test_transport_errors_are_the_familys_own(family: Family) -> None:
    # SDKs retry on their httpx's ConnectError: httpcore's must be translated.
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        async with family.api.keepalive_client(trust_env=False) as client:
            with pytest.raises(family.httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")
