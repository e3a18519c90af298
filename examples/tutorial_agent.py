"""The tutorial's agent (docs/tutorial.md): a Trio agent on the relay that answers every
user message with a reply streamed into the chat, word by word, against the reference
connector. No LLM: the words come from a generator, so it runs anywhere.

    python examples/tutorial_agent.py "hello there"
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import trio

import trio_relay
from trio_relay.testing import open_connector


async def words_of_the_answer(question: str) -> AsyncIterator[str]:
    """Stands in for a model's token stream: the answer arrives a word at a time."""
    for word in f"You said: {question}".split():
        await trio.sleep(0.05)
        yield word + " "


async def on_message(event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
    """Called once per user message (a replayed message is not handled twice)."""
    chat_id = event.source.chat_id
    if chat_id is None or not event.text:
        return
    # Typing until the first write, then one message edited as the answer grows.
    async with relay.stream_reply(chat_id, reply_to=event.message_id) as reply:
        async for word in words_of_the_answer(event.text):
            await reply.write(word)


async def main(question: str) -> None:
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(timeout=10)
        buffer_id = connector.say("C1", question)  # a user writes in chat C1
        # The connector sees the ack once the handler returned: the reply is done.
        with trio.fail_after(30):
            await connector.wait_until(lambda: buffer_id in connector.acks)
        print(connector.transcript_text("C1").rstrip("\n"))
        print("delivered:", relay.stats.delivered)


if __name__ == "__main__":
    trio.run(main, " ".join(sys.argv[1:]) or "hello")
