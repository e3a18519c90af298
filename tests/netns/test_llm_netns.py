"""The real SDKs against a provider that vanishes mid-stream without a FIN or RST.

The fake provider (fake_provider.py) runs in a network namespace (netns.py) and stalls
after two deltas, holding the connection; ``vanish()`` then drops every packet both ways.
Only TCP keepalive can end the SDK's read: ``llm_client`` has no read timeout. Kernel
timed, so these use wall time, bounded by idle + interval * count + 1 s.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
import trio

from trio_relay import KeepaliveConfig
from trio_relay.http import llm_client
from trio_relay.testing.netns import NetnsHost

PROVIDER_CODE = (Path(__file__).resolve().parents[1] / "fake_provider.py").read_text()
CONFIG = KeepaliveConfig(idle=1, interval=1, count=2)
BOUND = CONFIG.idle + CONFIG.interval * CONFIG.count + 1  # 4 s


async def openai_stream(base_url: str, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", http_client=http,
                                max_retries=0)  # fmt: skip
    stream = await client.chat.completions.create(
        model="stall", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return stream.__aiter__()


async def anthropic_stream(base_url: str, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="k", http_client=http,
                                      max_retries=0)  # fmt: skip
    stream = await client.messages.create(
        model="stall", max_tokens=16, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return stream.__aiter__()


@pytest.mark.netns
@pytest.mark.parametrize("open_stream", [openai_stream, anthropic_stream],
                         ids=["openai", "anthropic"])  # fmt: skip
async def test_sdk_stream_fails_within_the_keepalive_bound(
    netns_host: NetnsHost,
    open_stream: Callable[[str, httpx2.AsyncClient], Awaitable[AsyncIterator[Any]]],
) -> None:
    server = await netns_host.run_python(PROVIDER_CODE, netns_host.address)
    base_url = f"http://{netns_host.address}:{int(await server.readline())}"
    async with llm_client(keepalive=CONFIG, trust_env=False) as http:
        stream = await open_stream(base_url, http)
        with trio.fail_after(5):
            # The stream's start and the first deltas arrive before the stall.
            for _ in range(3):
                await anext(stream)
        await netns_host.vanish()
        start = trio.current_time()
        failed_after = math.inf
        with trio.move_on_after(BOUND + 2):
            with pytest.raises((httpx2.ReadError, openai.APIConnectionError,
                                anthropic.APIConnectionError)):  # fmt: skip
                while True:
                    await anext(stream)
            failed_after = trio.current_time() - start
    assert CONFIG.idle <= failed_after <= BOUND, failed_after
