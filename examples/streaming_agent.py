"""A streaming LLM agent on trio_relay: every user message is answered by the model,
streamed into the chat as it is generated (typing until the first token, then one
message edited as the answer grows, a new one when a message is full).

    OPENAI_API_KEY=... python examples/streaming_agent.py https://connector.example
    OPENAI_API_KEY=... python examples/streaming_agent.py --demo "Say hello"

``--demo`` runs against a local reference connector: it injects one user message,
waits for the answer, and prints the chat's transcript. ``OPENAI_BASE_URL`` points the
model at any OpenAI-compatible server (the tests use a local fake one).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import trio
from openai import AsyncOpenAI

import trio_relay
from trio_relay.http import llm_client, stall_timeout
from trio_relay.testing import open_connector

MODEL = "gpt-4o-mini"
STALL_SECONDS = 60.0  # a provider that sends nothing for this long is given up on


async def answer(
    event: trio_relay.MessageEvent, relay: trio_relay.Relay, model: AsyncOpenAI, name: str
) -> None:
    """Stream the model's answer to ``event`` into its chat."""
    chat_id = event.source.chat_id
    if chat_id is None or not event.text:
        return
    async with relay.stream_reply(chat_id, reply_to=event.message_id) as reply:
        stream = await model.chat.completions.create(
            model=name, messages=[{"role": "user", "content": event.text}], stream=True
        )
        # Raises trio_relay.StreamStalled if no chunk comes for STALL_SECONDS.
        async with aclosing(stall_timeout(stream, STALL_SECONDS)) as chunks:
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    await reply.write(chunk.choices[0].delta.content)


@asynccontextmanager
async def open_agent(
    url: str,
    *,
    model: str = MODEL,
    identities: list[trio_relay.Identity] | None = None,
    auth: trio_relay.UpgradeAuth | None = None,
) -> AsyncIterator[trio_relay.Relay]:
    """The agent, connected to the connector at ``url`` for the block's duration."""
    # One HTTP client per SDK client, with TCP keepalive: a dead provider is noticed.
    async with AsyncOpenAI(http_client=llm_client()) as openai:

        async def on_message(event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
            await answer(event, relay, openai, model)

        async with trio_relay.open_relay(
            url, identities=identities, auth=auth, on_message=on_message
        ) as relay:
            yield relay


async def demo(prompt: str, *, model: str = MODEL) -> str:
    """One conversation turn against a local reference connector; the transcript."""
    async with open_connector() as connector, open_agent(connector.url, model=model) as relay:
        await relay.wait_connected(timeout=10)
        buffer_id = connector.say("C1", prompt)
        # Acked once the handler returned: the answer is complete (its final edit done).
        with trio.fail_after(120):
            await connector.wait_until(lambda: buffer_id in connector.acks)
        return connector.transcript_text("C1")


async def serve(url: str) -> None:
    async with open_agent(url) as relay:
        await relay.wait_connected()
        print(f"agent connected to {relay.url}; Ctrl-C to stop", flush=True)
        await trio.sleep_forever()


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--demo"]:
            print(trio.run(demo, " ".join(argv[1:]) or "Say hello"), end="")
        elif len(argv) == 1:
            trio.run(serve, argv[0])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
