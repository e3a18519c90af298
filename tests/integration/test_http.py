"""trio_relay.http against real servers and a real proxy on 127.0.0.1.

The servers run in threads (stdlib socketserver) so the blocking sync client can be tested
with them too. Options are read back from the *client's* connected socket.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import select
import socket
import socketserver
import ssl
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import trio
import trustme

from trio_relay._core.keepalive import KeepaliveConfig
from trio_relay.http import (
    StreamStalled,
    keepalive_client,
    keepalive_sync_client,
    stall_timeout,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads Linux TCP options")

TCP = socket.IPPROTO_TCP
# Far from the kernel defaults (7200/75/9, keepalive off): a match proves they were set.
CONFIG = KeepaliveConfig(idle=7, interval=3, count=4)
EXPECTED_OPTIONS = {"keepalive": 1, "idle": 7, "interval": 3, "count": 4, "user_timeout": 19_000}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The machine's own proxy settings must not leak into tests of proxy handling.
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def keepalive_options(sock: Any) -> dict[str, int]:
    return {
        "keepalive": int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0),
        "idle": sock.getsockopt(TCP, socket.TCP_KEEPIDLE),
        "interval": sock.getsockopt(TCP, socket.TCP_KEEPINTVL),
        "count": sock.getsockopt(TCP, socket.TCP_KEEPCNT),
        "user_timeout": sock.getsockopt(TCP, socket.TCP_USER_TIMEOUT),
    }


def client_socket(response: httpx.Response) -> Any:
    """The client side socket the response arrived on."""
    return response.extensions["network_stream"].get_extra_info("socket")


# --- a tiny origin server ----------------------------------------------------------------

SSE_EVENTS = 200


class OriginHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/sse":
            self._stream_events()
            return
        body = f"hello {self.headers.get('x-test', '-')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for number in range(SSE_EVENTS):
            event = f"data: {number}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            if number % 50 == 0:
                self.wfile.flush()
                time.sleep(0.005)  # let some chunks arrive on their own
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_origin(tls: ssl.SSLContext | None = None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OriginHandler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        scheme = "https" if tls else "http"
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- a tiny forward proxy (absolute-form GET and CONNECT) --------------------------------


class ProxyHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.request.recv(65536)
            if not data:
                return
            head += data
        request_line, rest = head.split(b"\r\n", 1)
        method, target, version = request_line.decode().split(" ")
        self.server.seen.append(f"{method} {target}")  # type: ignore[attr-defined]
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            url = urlsplit(target)
            upstream = socket.create_connection((url.hostname, url.port or 80))
            path = url.path + (f"?{url.query}" if url.query else "")
            upstream.sendall(f"{method} {path} {version}\r\n".encode() + rest)
        with upstream:
            _pipe(self.request, upstream)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 5)
        if not readable:
            return
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@contextlib.contextmanager
def serve_proxy() -> Iterator[tuple[str, list[str]]]:
    """Yields the proxy URL and the list of request lines it has seen."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ProxyHandler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


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
    """(server context, client context trusting it) for 127.0.0.1."""
    ca = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


# --- the options are on the connected socket ---------------------------------------------


async def test_async_client_socket_carries_the_options(origin: str) -> None:
    async with (
        keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
        assert client_socket(response).getsockopt(TCP, socket.TCP_NODELAY) != 0


async def test_default_config_is_applied_when_none_is_given(origin: str) -> None:
    async with keepalive_client() as client, client.stream("GET", origin) as response:
        options = keepalive_options(client_socket(response))
    assert options == {"keepalive": 1, "idle": 30, "interval": 10, "count": 3,
                       "user_timeout": 60_000}  # fmt: skip


async def test_plain_httpx_lacks_the_options(origin: str) -> None:
    # The control: what the read-back shows without this module.
    async with httpx.AsyncClient() as client, client.stream("GET", origin) as response:
        assert keepalive_options(client_socket(response))["keepalive"] == 0


async def test_disabled_config_sets_no_keepalive(origin: str) -> None:
    async with (
        keepalive_client(keepalive=KeepaliveConfig.disabled()) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response))["keepalive"] == 0


def test_sync_client_socket_carries_the_options(origin: str) -> None:
    with (
        keepalive_sync_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
        assert response.read() == b"hello -"


# --- the caller's kwargs ----------------------------------------------------------------


async def test_kwargs_are_never_mutated_and_can_build_many_clients(
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
        "limits": httpx.Limits(max_connections=5),
    }
    snapshot = copy.deepcopy(kwargs)
    for attempt in range(3):
        async with keepalive_client(keepalive=CONFIG, **kwargs) as client:
            response = await client.get(origin)
            assert response.text == "hello kept", f"client {attempt + 1} of 3"
        assert kwargs == snapshot
    assert len(seen) == 3  # each went through the proxy built from the environment


# --- proxies ----------------------------------------------------------------------------


async def test_http_proxy_from_environment_is_used_with_the_options(
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    async with (
        keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", f"{origin}/hello") as response,
    ):
        sock = client_socket(response)
        assert sock.getpeername()[1] == urlsplit(proxy_url).port  # to the proxy
        assert keepalive_options(sock) == EXPECTED_OPTIONS
        assert (await response.aread()) == b"hello -"
    assert seen == [f"GET {origin}/hello"]


async def test_https_proxy_from_environment_tunnels_with_the_options(
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
            keepalive_client(keepalive=CONFIG, verify=client_tls) as client,
            client.stream("GET", origin) as response,
        ):
            sock = client_socket(response)
            assert sock.getpeername()[1] == urlsplit(proxy_url).port
            assert keepalive_options(sock) == EXPECTED_OPTIONS
            assert (await response.aread()) == b"hello -"
    assert seen == [f"CONNECT {urlsplit(origin).netloc}"]


async def test_explicit_proxy_argument_carries_the_options(
    origin: str, proxy: tuple[str, list[str]]
) -> None:
    proxy_url, seen = proxy
    async with (
        keepalive_client(keepalive=CONFIG, proxy=proxy_url, trust_env=False) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
    assert len(seen) == 1


@pytest.mark.parametrize(
    "environment",
    [{"NO_PROXY": "127.0.0.1"}, {"no_proxy": "localhost, 127.0.0.1"}, {"NO_PROXY": "*"}],
)
async def test_no_proxy_is_respected(
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
        keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", origin) as response,
    ):
        assert keepalive_options(client_socket(response)) == EXPECTED_OPTIONS
    assert seen == []


async def test_trust_env_false_ignores_environment_proxies(
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    async with keepalive_client(trust_env=False) as client:
        assert (await client.get(origin)).status_code == 200
    assert seen == []


async def test_explicit_transport_and_mounts_are_respected(
    origin: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", proxy_url)

    def answer(text: str) -> httpx.MockTransport:
        return httpx.MockTransport(lambda request: httpx.Response(200, text=text))

    async with keepalive_client(transport=answer("caller transport")) as client:
        assert (await client.get(origin)).text == "caller transport"
    # Same pattern as the environment's HTTP_PROXY mount: the caller's must win.
    async with keepalive_client(mounts={"http://": answer("caller mount")}) as client:
        assert (await client.get(origin)).text == "caller mount"
    assert seen == []


# --- streams ----------------------------------------------------------------------------


async def test_chunked_event_stream_arrives_whole(origin: str) -> None:
    received: list[str] = []
    async with (
        keepalive_client(keepalive=CONFIG) as client,
        client.stream("GET", f"{origin}/sse") as response,
    ):
        lines = stall_timeout(response.aiter_lines(), 5)
        async with aclosing(lines):
            received = [line async for line in lines if line]
    assert received == [f"data: {number}" for number in range(SSE_EVENTS)]


# --- stall_timeout, on a mock clock -----------------------------------------------------


async def _paced(gaps: list[float], *, then_stall: bool = False) -> AsyncIterator[int]:
    for number, gap in enumerate(gaps):
        await trio.sleep(gap)
        yield number
    if then_stall:
        await trio.sleep_forever()


async def test_stall_raises_after_the_quiet_time_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[tuple[int, float]] = []
    start = trio.current_time()
    with pytest.raises(StreamStalled, match=r"no data arrived for 3 s") as caught:
        async for number in stall_timeout(_paced([2.9, 2.9], then_stall=True), 3):
            received.append((number, trio.current_time() - start))
    assert [number for number, _ in received] == [0, 1]
    assert [at for _, at in received] == pytest.approx([2.9, 5.8])
    assert trio.current_time() - start == pytest.approx(5.8 + 3)
    assert caught.value.seconds == 3


async def test_stall_before_the_first_item(autojump_clock: trio.testing.MockClock) -> None:
    with pytest.raises(StreamStalled):
        async for _ in stall_timeout(_paced([], then_stall=True), 10):
            pass
    assert trio.current_time() == pytest.approx(10)


async def test_steady_stream_with_a_slow_consumer_does_not_raise(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received = []
    async for number in stall_timeout(_paced([2.9] * 5), 3):
        received.append(number)
        # The consumer's own time must not count as the producer's silence.
        await trio.sleep(10)
    assert received == [0, 1, 2, 3, 4]


async def test_the_wrapped_iterator_is_closed_on_early_exit() -> None:
    closed = trio.Event()

    async def source() -> AsyncIterator[int]:
        try:
            for number in range(10):
                yield number
        finally:
            closed.set()

    wrapped = stall_timeout(source(), 5)
    async with aclosing(wrapped):
        async for number in wrapped:
            if number == 2:
                break
    assert closed.is_set()


async def test_iterators_without_aclose_work() -> None:
    class Countdown:
        def __init__(self) -> None:
            self.left = 3

        def __aiter__(self) -> Countdown:
            return self

        async def __anext__(self) -> int:
            if not self.left:
                raise StopAsyncIteration
            self.left -= 1
            return self.left

    assert [n async for n in stall_timeout(Countdown(), 1)] == [2, 1, 0]


async def test_non_positive_stall_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="seconds > 0"):
        async for _ in stall_timeout(_paced([0]), 0):
            pass
