"""The tutorial's second agent (docs/tutorial.md, "Live cards and task cards"): on a
platform with Slack's newer capabilities, a turn shows its progress as a task card and
streams its answer as a live card (``draft`` frames sealed into the message), against
the reference connector. No LLM: the words come from a generator, so it runs anywhere.

    python examples/live_card_agent.py "hello there"
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import trio

import trio_relay
from trio_relay import TaskChunk, TaskStatus
from trio_relay.testing import live_descriptor, open_connector


async def words_of_the_answer(question: str) -> AsyncIterator[str]:
    """Stands in for a model's token stream: the answer arrives a word at a time."""
    for word in f"You said: {question}".split():
        await trio.sleep(0.05)
        yield word + " "


def plan(reading: TaskStatus, answering: TaskStatus) -> list[TaskChunk]:
    """The whole card: each update sends every task, not only the one that changed."""
    return [
        TaskChunk("read", "Read the question", reading),
        TaskChunk("answer", "Write the answer", answering),
    ]


async def on_message(event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
    """One turn: a task card for its progress, a live card for its answer."""
    chat_id = event.source.chat_id
    if chat_id is None or not event.text:
        return
    # The card is advisory: update() returns an Outcome and never raises for the network
    # (on a platform without task cards it sends nothing: "unsupported_op").
    async with relay.task_card(chat_id, reply_to=event.message_id) as card:
        await card.update(plan("in_progress", "pending"))
        await card.update(plan("complete", "in_progress"))
        # Drafts with the whole text so far, sealed into one message when the block ends
        # (on other platforms: edits of a message, or a preview and then a send).
        async with relay.stream_reply(
            chat_id, reply_to=event.message_id, format_hints={"markdown_blocks": True}
        ) as reply:
            async for word in words_of_the_answer(event.text):
                await reply.write(word)
        answered = reply.outcome is not None and reply.outcome.success
        await card.update(plan("complete", "complete" if answered else "error"))


async def main(question: str) -> None:
    # A connector whose "slack" platform has live cards, task cards and block rendering.
    slack = live_descriptor(task_cards=True, block_formatting=True)
    async with (
        open_connector(descriptors={"slack": slack}) as connector,
        trio_relay.open_relay(
            connector.url,
            identities=[trio_relay.Identity("slack", "B1")],
            on_message=on_message,
        ) as relay,
    ):
        await relay.wait_connected(timeout=10)
        buffer_id = connector.say("C1", question)  # a user writes in chat C1
        with trio.fail_after(30):
            await connector.wait_until(lambda: buffer_id in connector.acks)
        lines = connector.transcript_text("C1").splitlines()
        print("\n".join(line for line in lines if line != "bot typing"))


if __name__ == "__main__":
    trio.run(main, " ".join(sys.argv[1:]) or "hello")
