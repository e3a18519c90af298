"""Transport security: ``wss://`` verified by default, custom contexts, no plaintext
off the machine unless asked for.

The reference connector serves TLS with a certificate from a throwaway ``trustme`` CA.
Nothing in this file sends a packet to a non-loopback address: where a test needs the
relay to get as far as dialling such a host, a dialer passed through
``RelayConfig(dialer=...)`` records the dial and fails it without a packet.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
import trio
import trustme

import trio_relay
from trio_relay import RelayConfig, State
from trio_relay.testing import FaultDialer, ReferenceConnector, open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    return context


@pytest.fixture
def trusting_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client context that trusts the test CA (and nothing else)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, checks hostnames
    context.load_verify_locations(cadata=ca.cert_pem.bytes().decode())
    return context


@pytest.fixture
async def tls_connector(server_context: ssl.SSLContext) -> AsyncIterator[ReferenceConnector]:
    async with open_connector(ssl_context=server_context) as connector:
        yield connector


def config(**overrides: Any) -> RelayConfig:
    # One dial, then a long wait: a refused certificate is not retried in a hot loop.
    defaults: dict[str, Any] = {
        "close_timeout": 0.2,
        "backoff_first_delay": 60.0,
        "backoff_initial": 60.0,
        "backoff_max": 60.0,
    }
    defaults.update(overrides)
    return RelayConfig(**defaults)


async def wait_dial_failures(relay: trio_relay.Relay, count: int = 1) -> None:
    with trio.fail_after(10):
        while relay.stats.dial_failures < count:
            await trio.sleep(0.01)


def dial_log(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if "dial failed" in r.getMessage())


async def test_connector_serves_tls(tls_connector: ReferenceConnector) -> None:
    assert tls_connector.url.startswith("https://127.0.0.1:")
    assert tls_connector.ws_url.startswith("wss://127.0.0.1:")


async def test_wss_with_a_trusted_ca_connects_and_verifies_the_hostname(
    tls_connector: ReferenceConnector, trusting_context: ssl.SSLContext
) -> None:
    url = f"https://localhost:{tls_connector.port}"
    async with trio_relay.open_relay(url, config=config(ssl_context=trusting_context)) as relay:
        assert relay.url.startswith("wss://localhost:")
        await relay.wait_connected(10)
        outcome = await relay.request(SEND)
    assert outcome.success
    assert relay.stats.dial_failures == 0


async def test_wss_to_an_ip_address_checks_the_ip_san(
    tls_connector: ReferenceConnector, trusting_context: ssl.SSLContext
) -> None:
    async with trio_relay.open_relay(
        tls_connector.url, config=config(ssl_context=trusting_context)
    ) as relay:
        await relay.wait_connected(10)
        assert (await relay.request(SEND)).success


async def test_default_context_refuses_an_untrusted_certificate(
    tls_connector: ReferenceConnector, caplog: pytest.LogCaptureFixture
) -> None:
    """No ssl_context: the system's trust store, which does not know the test CA."""
    caplog.set_level(logging.INFO, logger="trio_relay")
    url = f"https://localhost:{tls_connector.port}"
    async with trio_relay.open_relay(url, config=config()) as relay:
        await wait_dial_failures(relay)
        assert relay.state is State.CONNECTING
        assert relay.stats.connects == 0
    assert tls_connector.handshakes == 0
    log = dial_log(caplog)
    assert "CERTIFICATE_VERIFY_FAILED" in log, log
    assert "certificate verify failed" in log


async def test_hostname_mismatch_is_refused(
    ca: trustme.CA, trusting_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    """A certificate from a trusted CA, but for another name, is still refused."""
    caplog.set_level(logging.INFO, logger="trio_relay")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("connector.test").configure_cert(server)
    async with open_connector(ssl_context=server) as connector:
        url = f"https://localhost:{connector.port}"
        async with trio_relay.open_relay(url, config=config(ssl_context=trusting_context)) as relay:
            await wait_dial_failures(relay)
            assert relay.state is State.CONNECTING
        assert connector.handshakes == 0
    log = dial_log(caplog)
    assert "Hostname mismatch" in log or "doesn't match" in log, log


async def test_a_custom_context_is_used_as_given(tls_connector: ReferenceConnector) -> None:
    """The user's own context wins, even one that turns verification off on purpose."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    async with trio_relay.open_relay(
        f"https://localhost:{tls_connector.port}", config=config(ssl_context=context)
    ) as relay:
        await relay.wait_connected(10)
        assert (await relay.request(SEND)).success


async def test_a_fault_dialer_dials_tls_with_the_config_s_context_and_writes_via_send_all(
    tls_connector: ReferenceConnector, trusting_context: ssl.SSLContext
) -> None:
    """TLS takes no direct write (its ``send_nowait`` takes nothing: the plaintext is
    encrypted before the socket is asked), so every request goes by the writer task;
    the FaultDialer's real dialer underneath is built from the relay's config."""
    base = config(ssl_context=trusting_context)
    dialer = FaultDialer(config=base)
    url = f"https://localhost:{tls_connector.port}"
    async with trio_relay.open_relay(url, config=replace(base, dialer=dialer)) as relay:
        await relay.wait_connected(5)
        awaited = dialer.awaited_writes
        for _ in range(3):
            assert (await relay.request(SEND)).success
        assert dialer.direct_writes == 0
        assert dialer.awaited_writes >= awaited + 3


async def test_plaintext_client_to_a_tls_connector_fails_cleanly(
    tls_connector: ReferenceConnector,
) -> None:
    url = f"http://127.0.0.1:{tls_connector.port}"
    async with trio_relay.open_relay(url, config=config(handshake_timeout=2.0)) as relay:
        await wait_dial_failures(relay)
        assert relay.state is State.CONNECTING


def test_the_ssl_context_is_not_in_the_config_repr(trusting_context: ssl.SSLContext) -> None:
    assert "SSLContext" not in repr(RelayConfig(ssl_context=trusting_context))


# --- plaintext to other hosts ---------------------------------------------------------


class NoDial:
    """A dialer that records where each dial would go and fails it without a packet."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, endpoint: Any) -> Any:
        self.seen.append(str(endpoint))
        await trio.lowlevel.checkpoint()
        raise OSError("dial intercepted by the test")


@pytest.fixture
def dials() -> NoDial:
    return NoDial()


@pytest.mark.parametrize(
    "url",
    [
        "http://connector.example",
        "ws://connector.example:8080/relay",
        "http://10.0.0.7:9000",
        "http://[2001:db8::1]:9000",
    ],
)
async def test_plaintext_to_a_non_loopback_host_is_refused(url: str, dials: NoDial) -> None:
    with pytest.raises(ValueError, match="refusing plaintext ws://") as info:
        async with trio_relay.open_relay(url, config=config(dialer=dials)):
            pass  # pragma: no cover - never entered
    assert "allow_insecure=True" in str(info.value)
    assert dials.seen == []  # refused before anything was resolved or dialled


@pytest.mark.parametrize(
    "url",
    [
        "http://connector.example",
        "ws://10.0.0.7:9000",
    ],
)
async def test_allow_insecure_opts_in_to_plaintext(url: str, dials: NoDial) -> None:
    settings = config(allow_insecure=True, dialer=dials)
    async with trio_relay.open_relay(url, config=settings) as relay:
        await wait_dial_failures(relay)
        assert relay.state is State.CONNECTING
    assert len(dials.seen) == 1 and dials.seen[0].startswith("ws://")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9", "https://connector.example"],
)
async def test_loopback_plaintext_and_any_tls_need_no_opt_in(url: str, dials: NoDial) -> None:
    async with trio_relay.open_relay(url, config=config(dialer=dials)) as relay:
        await wait_dial_failures(relay)
    assert len(dials.seen) == 1


async def test_an_established_tls_link_cut_without_close_notify_is_not_a_handshake_failure(
    server_context: ssl.SSLContext,
    trusting_context: ssl.SSLContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A TLS front before a plain connector that, once the link is up, drops the TCP
    # connection without a close_notify (what nginx's old worker does at a reload).
    caplog.set_level(logging.DEBUG, logger="trio_relay")
    cut = trio.Event()

    async def front(tcp: trio.SocketStream, backend_port: int) -> None:
        tls = trio.SSLStream(tcp, server_context, server_side=True)
        await tls.do_handshake()
        backend = await trio.open_tcp_stream("127.0.0.1", backend_port)

        async def pump(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
            while data := await source.receive_some(65536):
                await sink.send_all(data)

        async with trio.open_nursery() as pumps:
            pumps.start_soon(pump, tls, backend)
            pumps.start_soon(pump, backend, tls)
            await cut.wait()
            pumps.cancel_scope.cancel()
        await tcp.aclose()  # the TCP socket alone: no close_notify
        await backend.aclose()

    async with open_connector() as connector, trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, host="127.0.0.1"), lambda s: front(s, connector.port), 0
        )
        port = listeners[0].socket.getsockname()[1]
        async with trio_relay.open_relay(
            f"https://localhost:{port}", config=config(ssl_context=trusting_context)
        ) as relay:
            await relay.wait_connected(10)
            cut.set()
            with trio.fail_after(10):
                while relay.state is State.CONNECTED:
                    await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "the peer closed the TLS connection without a close_notify" in text
    assert "handshake failed" not in text
