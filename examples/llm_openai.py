"""Stream a reply from OpenAI with the openai 3.x SDK, under Trio, on a client that
notices a dead provider (TCP keepalive) and a stuck one (a stall guard).

    OPENAI_API_KEY=... python examples/llm_openai.py "Say hello"

``OPENAI_BASE_URL`` points it at any OpenAI-compatible server (the tests use a local
fake one). ``ask_blocking`` is the same with the blocking ``OpenAI`` client.
"""

from __future__ import annotations

import sys
from contextlib import aclosing, closing

import trio
from openai import AsyncOpenAI, OpenAI

from trio_relay import KeepaliveConfig
from trio_relay.http import llm_client, llm_sync_client, stall_timeout, sync_stall_timeout

# A dead provider is noticed within idle + interval * count = 30 s.
KEEPALIVE = KeepaliveConfig(idle=15, interval=5, count=3)


async def ask(prompt: str, *, model: str = "gpt-4o-mini", stall_seconds: float = 60) -> str:
    # One HTTP client per SDK client: closing the SDK closes its HTTP client.
    async with AsyncOpenAI(http_client=llm_client(keepalive=KEEPALIVE)) as openai:
        stream = await openai.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], stream=True
        )
        parts: list[str] = []
        # Raises trio_relay.StreamStalled if no chunk comes for stall_seconds.
        async with aclosing(stall_timeout(stream, stall_seconds)) as chunks:
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
        return "".join(parts)


def ask_blocking(prompt: str, *, model: str = "gpt-4o-mini", stall_seconds: float = 60) -> str:
    with OpenAI(http_client=llm_sync_client(keepalive=KEEPALIVE)) as openai:
        stream = openai.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], stream=True
        )
        parts: list[str] = []
        with closing(sync_stall_timeout(stream, stall_seconds)) as chunks:
            for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
        return "".join(parts)


if __name__ == "__main__":
    print(trio.run(ask, " ".join(sys.argv[1:]) or "Say hello"))
