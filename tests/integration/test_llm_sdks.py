"""The real SDKs (openai 3.x, anthropic 2.x) on trio_relay's clients, under Trio,
streaming from a local fake provider on another stack (stdlib http.server in a thread,
see fake_provider.py). The code under test is the examples' (examples/llm_*.py), which
the docs show (docs/how-to/llm-sdks.md includes them)."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from fake_provider import STALL_AFTER, TEXT, WORDS, ProviderServer, serve_provider
from http_servers import PROXY_VARIABLES

from trio_relay import StreamStalled
from trio_relay.http import llm_client

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


openai_example = load_example("llm_openai")
anthropic_example = load_example("llm_anthropic")


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in PROXY_VARIABLES:  # the machine's proxies must not capture loopback
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with serve_provider() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        yield server


# --- a normal stream ----------------------------------------------------------------------


async def test_async_openai_streams(provider: ProviderServer) -> None:
    assert await openai_example.ask("Say hello") == TEXT
    assert provider.requests[0]["stream"] is True
    assert provider.requests[0]["messages"] == [{"role": "user", "content": "Say hello"}]


def test_blocking_openai_streams(provider: ProviderServer) -> None:
    assert openai_example.ask_blocking("Say hello") == TEXT


async def test_async_anthropic_streams(provider: ProviderServer) -> None:
    assert await anthropic_example.ask("Say hello") == TEXT
    assert provider.requests[0]["stream"] is True


@pytest.mark.parametrize("name", ["llm_openai", "llm_anthropic"])
def test_the_examples_run_as_scripts(provider: ProviderServer, name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "Say", "hello"],
        capture_output=True, text=True, timeout=60, env=os.environ.copy(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{TEXT}\n"


def test_the_sdks_take_the_preset_timeouts() -> None:
    # The SDKs use the http_client's timeout when it is not httpx2's default.
    expected = httpx2.Timeout(connect=10, read=None, write=30, pool=30)
    assert openai.AsyncOpenAI(api_key="k", http_client=llm_client()).timeout == expected
    assert anthropic.AsyncAnthropic(api_key="k", http_client=llm_client()).timeout == expected


# --- a stall, caught by the guard ---------------------------------------------------------


async def test_async_openai_stall_is_caught(provider: ProviderServer) -> None:
    with pytest.raises(StreamStalled):
        await openai_example.ask("hi", model="stall", stall_seconds=0.5)
    assert len(provider.requests) == 1  # the guard fails the stream; nothing retried it


def test_blocking_openai_stall_is_caught(provider: ProviderServer) -> None:
    with pytest.raises(StreamStalled):
        openai_example.ask_blocking("hi", model="stall", stall_seconds=0.5)
    # The guard's reader thread was blocked on the stalled socket; shutting the socket
    # down ended it, while the provider still holds the connection open.
    for thread in threading.enumerate():
        if thread.name == "trio_relay sync_stall_timeout":
            thread.join(timeout=10)
            assert not thread.is_alive()
    assert not provider.stopping.is_set()


async def test_async_anthropic_stall_is_caught(provider: ProviderServer) -> None:
    with pytest.raises(StreamStalled):
        await anthropic_example.ask("hi", model="stall", stall_seconds=0.5)


async def test_a_stalled_stream_delivered_what_came_before(provider: ProviderServer) -> None:
    from contextlib import aclosing

    from trio_relay.http import stall_timeout

    received: list[str] = []
    async with openai.AsyncOpenAI(http_client=llm_client(), max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="stall", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(StreamStalled):
            async with aclosing(stall_timeout(stream, 0.5)) as chunks:
                async for chunk in chunks:
                    received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "".join(WORDS[:STALL_AFTER])


# --- kwargs isolation: one fresh client per SDK client, kwargs never mutated ---------------


async def test_three_sequential_rebuilds_from_one_kwargs_dict(provider: ProviderServer) -> None:
    seen: list[str] = []

    async def record(request: httpx2.Request) -> None:
        seen.append(request.url.path)

    kwargs: dict[str, Any] = {
        "headers": {"x-trace": "rebuild"},
        "event_hooks": {"request": [record]},
        "limits": httpx2.Limits(max_connections=2),
    }
    snapshot = copy.copy(kwargs), {name: copy.copy(value) for name, value in kwargs.items()}
    http_clients: list[httpx2.AsyncClient] = []
    for attempt in range(3):
        http_openai, http_anthropic = llm_client(**kwargs), llm_client(**kwargs)
        http_clients += [http_openai, http_anthropic]
        async with openai.AsyncOpenAI(http_client=http_openai, max_retries=0) as gpt:
            stream = await gpt.chat.completions.create(
                model="normal", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            assert text == TEXT, f"openai rebuild {attempt + 1} of 3"
        async with anthropic.AsyncAnthropic(http_client=http_anthropic, max_retries=0) as claude:
            events = await claude.messages.create(
                model="normal", max_tokens=16, messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )  # fmt: skip
            text = "".join(
                [e.delta.text async for e in events
                 if e.type == "content_block_delta" and e.delta.type == "text_delta"]
            )  # fmt: skip
            assert text == TEXT, f"anthropic rebuild {attempt + 1} of 3"
        # Closing the SDK closed its own HTTP client, and only that one.
        assert http_openai.is_closed and http_anthropic.is_closed
        assert (kwargs, dict(kwargs)) == snapshot
        assert kwargs["event_hooks"]["request"] == [record]
    assert len({id(client) for client in http_clients}) == 6
    assert seen == ["/v1/chat/completions", "/v1/messages"] * 3
    assert [headers["x-trace"] for headers in provider.headers] == ["rebuild"] * 6
