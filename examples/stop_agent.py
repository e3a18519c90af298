"""Stopping a turn: a streaming LLM agent whose user can press stop mid-answer.

    OPENAI_API_KEY=... python examples/stop_agent.py https://connector.example
    OPENAI_API_KEY=... python examples/stop_agent.py --demo "Tell me a long story"

When the user presses stop, the connector sends ``interrupt_inbound`` for the chat, and
the relay cancels the handler running there (``RelayConfig.interrupt_cancels_turn``, on
by default without an ``on_interrupt``). Nothing here keeps a map of chats to cancel
scopes: the model's stream on ``trio_relay.http`` is closed by the cancellation, the
reply keeps what was on screen, and the delivery is acked, so no replay runs the turn
again. The handler only says "Stopped." in a shielded, bounded epilogue.

``--demo`` runs against a local reference connector: it writes one message, presses
stop once the first words are on screen, and prints the chat's transcript.
``OPENAI_BASE_URL`` points the model at any OpenAI-compatible server.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import trio
from openai import AsyncOpenAI

import trio_relay
from trio_relay.http import llm_client
from trio_relay.testing import open_connector

MODEL = "gpt-4o-mini"
EPILOGUE_SECONDS = 5.0  # the longest the "Stopped." note may take


async def answer(
    event: trio_relay.MessageEvent, relay: trio_relay.Relay, model: AsyncOpenAI, name: str
) -> None:
    """Stream the model's answer to ``event`` into its chat, until done or stopped."""
    chat_id = event.source.chat_id
    if chat_id is None or not event.text:
        return
    try:
        async with relay.stream_reply(chat_id, reply_to=event.message_id) as reply:
            stream = await model.chat.completions.create(
                model=name, messages=[{"role": "user", "content": event.text}], stream=True
            )
            async with aclosing(stream) as chunks:
                async for chunk in chunks:
                    if chunk.choices and chunk.choices[0].delta.content:
                        await reply.write(chunk.choices[0].delta.content)
    finally:
        # Cancelled because the user pressed stop (not a shutdown, not a bug): say so.
        # Shielded, or the cancellation would stop the note too; bounded, so a dead
        # link cannot hold the turn open.
        if relay.interrupted(chat_id):
            with trio.CancelScope(shield=True), trio.move_on_after(EPILOGUE_SECONDS):
                await relay.send_text(chat_id, "Stopped.")


@asynccontextmanager
async def open_agent(
    url: str, *, model: str = MODEL, auth: trio_relay.UpgradeAuth | None = None
) -> AsyncIterator[trio_relay.Relay]:
    """The agent, connected to the connector at ``url`` for the block's duration."""
    async with AsyncOpenAI(http_client=llm_client()) as openai:

        async def on_message(event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
            await answer(event, relay, openai, model)

        async with trio_relay.open_relay(url, auth=auth, on_message=on_message) as relay:
            yield relay


async def demo(prompt: str, *, model: str = MODEL) -> str:
    """One turn, stopped by its user once the first words show; the transcript."""
    async with open_connector() as connector, open_agent(connector.url, model=model) as relay:
        await relay.wait_connected(timeout=10)
        buffer_id = connector.say("C1", prompt)
        with trio.fail_after(60):
            await connector.wait_until(
                lambda: any(e.kind == "send" for e in connector.transcript("C1"))
            )
            connector.press_stop("C1")
            # Acked once the handler returned: stopped, and its epilogue sent.
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
            print(trio.run(demo, " ".join(argv[1:]) or "Tell me a long story"), end="")
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
