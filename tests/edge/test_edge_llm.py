"""An LLM stream through a real forward proxy and a real TLS front (issue 23): the
openai SDK on ``trio_relay.http.llm_client()``, ``HTTPS_PROXY`` naming squid (with basic
auth), nginx terminating TLS in front of a local fake provider (tests/fake_provider.py).

The stream must arrive chunk by chunk (a front or proxy that buffered it would deliver
nothing before a stall), and the stall guard must fire when the provider stops
mid-stream while holding the connection open."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import aclosing

import openai
import pytest
from edge_servers import PROXY_SOURCE, Edge, NginxSettings
from fake_provider import SLOW_PAUSE, STALL_AFTER, WORDS, ProviderServer, serve_provider

from trio_relay import KeepaliveConfig, StreamStalled
from trio_relay.http import llm_client, stall_timeout

pytestmark = pytest.mark.edge

USER, PASSWORD = "relay", "llm-pass"


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    with serve_provider() as server:
        yield server


def sdk_through_the_edge(
    edge: Edge,
    provider: ProviderServer,
    context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
    keepalive: KeepaliveConfig | None = None,
) -> openai.AsyncOpenAI:
    port = int(provider.url.rsplit(":", 1)[1])
    nginx = edge.nginx(NginxSettings(port))
    squid = edge.proxy("squid", credentials=(USER, PASSWORD))
    monkeypatch.setenv("HTTPS_PROXY", squid.url(USER, PASSWORD))
    return openai.AsyncOpenAI(
        base_url=f"{nginx.url}/v1",
        api_key="sk-test",
        http_client=llm_client(verify=context, keepalive=keepalive),
        max_retries=0,
    )


async def deltas(
    client: openai.AsyncOpenAI, model: str, received: list[str], stall_seconds: float = 1.0
) -> None:
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async with aclosing(stall_timeout(stream, stall_seconds)) as chunks:
        async for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)


async def test_the_stream_arrives_chunk_by_chunk_through_proxy_and_front(
    edge: Edge,
    provider: ProviderServer,
    client_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[str] = []
    async with sdk_through_the_edge(edge, provider, client_context, monkeypatch) as client:
        await deltas(client, "normal", received)
    assert received == WORDS  # one delta per chunk, in order
    assert provider.requests[0]["stream"] is True
    headers = {name.lower(): value for name, value in provider.headers[0].items()}
    assert headers["authorization"] == "Bearer sk-test"  # the key crossed both, in TLS
    assert headers["x-real-ip"] == PROXY_SOURCE  # nginx was reached through squid


async def test_a_provider_that_stops_mid_stream_is_caught_by_the_guard(
    edge: Edge,
    provider: ProviderServer,
    client_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[str] = []
    async with sdk_through_the_edge(edge, provider, client_context, monkeypatch) as client:
        with pytest.raises(StreamStalled):
            await deltas(client, "stall", received)
    # What came before the stall got through at once: nothing buffered it.
    assert received == WORDS[:STALL_AFTER]
    assert len(provider.requests) == 1  # the guard failed the stream; nothing retried it


async def test_keepalive_does_not_cut_a_pausing_stream_behind_proxy_and_front(
    edge: Edge,
    provider: ProviderServer,
    client_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The system this replaces once lost healthy streams behind reverse proxies to a
    # keepalive socket option. Here keepalive would call a dead peer after 2 s (1 s idle,
    # one 1 s probe); the model pauses 2.5 s mid-answer: the probes are answered (by
    # squid's kernel) and the stream must come through whole.
    keepalive = KeepaliveConfig(idle=1, interval=1, count=1)
    received: list[str] = []
    client = sdk_through_the_edge(edge, provider, client_context, monkeypatch, keepalive)
    async with client:
        await deltas(client, "slow", received, stall_seconds=SLOW_PAUSE + 3)
    assert received == WORDS
