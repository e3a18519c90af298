"""Stream a reply from Claude with the anthropic 2.x SDK, under Trio, on a client that
notices a dead provider (TCP keepalive) and a stuck one (a stall guard).

    ANTHROPIC_API_KEY=... python examples/llm_anthropic.py "Say hello"

``ANTHROPIC_BASE_URL`` points it at another server (the tests use a local fake one).
"""

from __future__ import annotations

import sys
from contextlib import aclosing

import trio
from anthropic import AsyncAnthropic

from trio_relay import KeepaliveConfig
from trio_relay.http import llm_client, stall_timeout

# A dead provider is noticed within idle + interval * count = 30 s.
KEEPALIVE = KeepaliveConfig(idle=15, interval=5, count=3)


async def ask(prompt: str, *, model: str = "claude-sonnet-5-5", stall_seconds: float = 60) -> str:
    # One HTTP client per SDK client: closing the SDK closes its HTTP client.
    async with AsyncAnthropic(http_client=llm_client(keepalive=KEEPALIVE)) as claude:
        stream = await claude.messages.create(
            model=model,
            max_tokens=1024,
            messages=[{"role": "user", "content": prompt}],
            stream=True,
        )
        parts: list[str] = []
        # Raises trio_relay.StreamStalled if no event comes for stall_seconds.
        async with aclosing(stall_timeout(stream, stall_seconds)) as events:
            async for event in events:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    parts.append(event.delta.text)
        return "".join(parts)


if __name__ == "__main__":
    print(trio.run(ask, " ".join(sys.argv[1:]) or "Say hello"))
