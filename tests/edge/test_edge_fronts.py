"""The relay behind real TLS fronts (issue 23): nginx and haproxy terminate TLS (a
certificate from a throwaway trustme CA) in front of the reference connector."""

from __future__ import annotations

import logging
import re
import ssl
from typing import Any

import pytest
import trio
from edge_servers import Edge, Haproxy, Nginx, NginxSettings

import trio_relay
from trio_relay import RelayConfig
from trio_relay.testing import ReferenceConnector, open_connector

pytestmark = pytest.mark.edge

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}
FRONTS = ["nginx", "haproxy"]


def front(edge: Edge, kind: str, connector: ReferenceConnector) -> Nginx | Haproxy:
    if kind == "nginx":
        return edge.nginx(NginxSettings(connector.port))
    return edge.haproxy(connector.port)


def config(context: ssl.SSLContext, **overrides: Any) -> RelayConfig:
    defaults: dict[str, Any] = {
        "ssl_context": context,
        "close_timeout": 0.2,
        "backoff_initial": 0.05,
        "backoff_max": 0.2,
    }
    return RelayConfig(**(defaults | overrides))


async def wait_for(predicate: Any, seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not predicate():
            await trio.sleep(0.02)


@pytest.mark.parametrize("kind", FRONTS)
async def test_wss_through_the_front(
    edge: Edge, client_context: ssl.SSLContext, kind: str
) -> None:
    async with open_connector() as connector:
        server = front(edge, kind, connector)
        async with trio_relay.open_relay(server.url, config=config(client_context)) as relay:
            await relay.wait_connected(10)
            big = {**SEND, "content": "x" * 3000}
            outcomes = [await relay.request(SEND), await relay.request(big)]
            assert all(outcome.success for outcome in outcomes), outcomes
            assert await relay.ping(5) >= 0
    assert [frame.action["content"] for frame in connector.outbound] == ["hi", "x" * 3000]


@pytest.mark.parametrize(("kind", "status"), [("nginx", "502"), ("haproxy", "503")])
async def test_the_front_s_answer_while_the_connector_is_down_then_the_first_success(
    edge: Edge, client_context: ssl.SSLContext, kind: str, status: str
) -> None:
    async with open_connector() as connector:
        server = front(edge, kind, connector)
        async with trio_relay.open_relay(server.url, config=config(client_context)) as relay:
            await relay.wait_connected(10)
            await connector.stop()
            # The front is up and answers for the connector: an HTTP error at the upgrade.
            await wait_for(lambda: status in (relay.stats.last_dial_failure or ""))
            failures = relay.stats.dial_failures
            assert relay.stats.connects == 1
            await connector.start()  # the same port again
            await relay.wait_connected(10)
            assert relay.stats.connects == 2
            assert (await relay.request(SEND)).success
    cause = relay.stats.last_dial_failure or ""
    assert f"upgrade refused: HTTP {status}" in cause, cause
    assert failures >= 1


async def test_a_maintenance_503_s_retry_after_is_honoured(
    edge: Edge, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector:
        nginx = edge.nginx(NginxSettings(connector.port, maintenance_retry_after=1))
        relay_config = config(client_context, backoff_max=5.0)
        async with trio_relay.open_relay(nginx.url, config=relay_config) as relay:
            await wait_for(lambda: relay.stats.dial_failures >= 1)
            nginx.reload(NginxSettings(connector.port))  # maintenance over
            await relay.wait_connected(10)
            assert (await relay.request(SEND)).success
    failed = [r.getMessage() for r in caplog.records if "dial failed" in r.getMessage()]
    assert failed and "HTTP 503" in failed[0], failed
    # The ladder alone would wait at most 0.05 s: the wait is the front's Retry-After.
    delays = [float(m) for m in re.findall(r"next attempt in ([\d.]+) s", " ".join(failed))]
    assert delays and all(delay >= 1.0 for delay in delays), failed


REQUESTERS = 16


@pytest.mark.parametrize("kind", FRONTS)
async def test_a_graceful_reload_under_load_loses_no_request(
    edge: Edge, client_context: ssl.SSLContext, kind: str
) -> None:
    # nginx: SIGHUP; the old worker keeps its WebSockets for worker_shutdown_timeout
    # (1 s here), then closes them without a close_notify. haproxy (-W): SIGUSR2; the
    # old worker keeps its tunnels. Either way every request must end with an outcome,
    # every success must be one the connector saw, and nothing definite may have left.
    outcomes: dict[str, trio_relay.Outcome] = {}
    async with open_connector() as connector:
        if kind == "nginx":
            server: Nginx | Haproxy = edge.nginx(
                NginxSettings(connector.port, worker_shutdown_timeout=1.0)
            )
        else:
            server = edge.haproxy(connector.port)
        relay_config = config(client_context, request_timeout=10.0)
        async with trio_relay.open_relay(server.url, config=relay_config) as relay:
            await relay.wait_connected(10)
            stop = trio.Event()

            async def requester(index: int) -> None:
                sequence = 0
                while not stop.is_set():
                    content = f"r{index}-{sequence}"
                    sequence += 1
                    action = {**SEND, "content": content}
                    outcomes[content] = await relay.request(action, wait_connected=True)
                    await trio.sleep(0.02)

            async with trio.open_nursery() as nursery:
                for index in range(REQUESTERS):
                    nursery.start_soon(requester, index)
                await trio.sleep(0.5)
                reloads_at = len(outcomes)
                if isinstance(server, Nginx):
                    server.reload(server.settings)
                else:
                    server.reload()
                await trio.sleep(2.0)  # past the old worker's end, and a redial
                settled_before = len(outcomes)
                await trio.sleep(0.5)
                stop.set()
            after = [outcomes[c] for c in list(outcomes)[settled_before:]]
    seen = {frame.action["content"] for frame in connector.outbound}
    assert len(outcomes) > reloads_at + REQUESTERS  # requests went on across the reload
    for content, outcome in outcomes.items():
        if outcome.success:
            assert content in seen, content  # a success is one the connector answered
        elif not outcome.ambiguous:
            assert content not in seen, (content, outcome)  # definite: it never left
    assert after and all(outcome.success for outcome in after), after
    if kind == "nginx":  # the old worker cut the link; the new one took the redial
        assert relay.stats.connects == 2
        cut = relay.stats.drops["closed by peer"]
        assert cut == 1, relay.stats.drops
    else:  # haproxy's old worker kept the tunnel
        assert relay.stats.connects == 1
