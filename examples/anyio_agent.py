"""The tutorial's agent written as AnyIO code (docs/how-to/anyio.md): ``anyio.run`` on
the Trio backend, an AnyIO task group around the relay, and the answer streamed from an
HTTP "model" through an httpx2 client of ``trio_relay.http``, against the reference
connector. The model is a few lines of AnyIO on loopback, so it runs anywhere.

    pip install '.[testing,httpx2]'
    python examples/anyio_agent.py "hello there"
"""

from __future__ import annotations

import sys
from functools import partial
from urllib.parse import quote, unquote

import anyio
import anyio.abc
import httpx2

import trio_relay
from trio_relay.http import llm_client
from trio_relay.testing import open_connector


async def serve_model(client: anyio.abc.SocketStream) -> None:
    """Stands in for an LLM provider: answers ``GET /answer?q=...`` a word at a time."""
    async with client:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await client.receive()
        target = request.split(b" ", 2)[1].decode()
        words = [word + " " for word in f"You said: {unquote(target.partition('q=')[2])}".split()]
        body_length = sum(len(word.encode()) for word in words)
        await client.send(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % body_length
        )
        for word in words:
            await anyio.sleep(0.05)
            await client.send(word.encode())


async def on_message(
    model: httpx2.AsyncClient, event: trio_relay.MessageEvent, relay: trio_relay.Relay
) -> None:
    """Streams the model's answer into the chat as it arrives."""
    chat_id = event.source.chat_id
    if chat_id is None or not event.text:
        return
    async with (
        relay.stream_reply(chat_id, reply_to=event.message_id) as reply,
        model.stream("GET", f"/answer?q={quote(event.text)}") as response,
    ):
        async for text in response.aiter_text():
            await reply.write(text)


async def main(question: str) -> None:
    async with anyio.create_task_group() as tasks:
        # The "model" listens in the same task group; port 0: a free one.
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        tasks.start_soon(listener.serve, serve_model)

        # One HTTP client for the model: TCP keepalive, no read timeout (a model pauses).
        async with (
            llm_client(base_url=f"http://127.0.0.1:{port}") as model,
            open_connector() as connector,
            trio_relay.open_relay(connector.url, on_message=partial(on_message, model)) as relay,
        ):
            await relay.wait_connected(timeout=10)
            buffer_id = connector.say("C1", question)  # a user writes in chat C1
            with anyio.fail_after(30):
                await connector.wait_until(lambda: buffer_id in connector.acks)
            print(connector.transcript_text("C1").rstrip("\n"))

        tasks.cancel_scope.cancel()  # stops the model's listener: the task group ends


if __name__ == "__main__":
    # The relay needs Trio: the "trio" backend runs this AnyIO code on it.
    anyio.run(main, " ".join(sys.argv[1:]) or "hello", backend="trio")
