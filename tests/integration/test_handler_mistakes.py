"""A handler the relay could not await is refused by ``open_relay`` itself, with a
``TypeError`` that names it and says ``async def``; every async form is taken.

Before, a handler written without ``async`` was accepted: each delivery ran it (its
side effects included), then failed with "NoneType can't be used in 'await'
expression", and the retries ran it again.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio

import trio_relay
from trio_relay.testing import open_connector

URL = "http://127.0.0.1:9"  # never dialled: the refusal comes before the block is entered


def handle(event: trio_relay.MessageEvent) -> None:  # the mistake: no async
    pass


def stop(session_key: str, chat_id: str) -> None:
    pass


@pytest.mark.parametrize(
    ("keyword", "handler", "named", "signature"),
    [
        ("on_message", handle, "on_message=handle ", "async def handle(event)"),
        ("on_interrupt", stop, "on_interrupt=stop ", "async def stop(session_key, chat_id)"),
        ("on_passthrough", handle, "on_passthrough=handle ", "async def handle(forward)"),
        ("on_dead_letter", handle, "on_dead_letter=handle ", "async def handle(dead_letter)"),
    ],
)
def test_a_plain_function_is_refused_when_the_relay_is_opened(
    keyword: str, handler: Any, named: str, signature: str
) -> None:
    # Outside a Trio run and before any `async with`: where the mistake is made.
    with pytest.raises(TypeError) as refused:
        trio_relay.open_relay(URL, **{keyword: handler})
    message = str(refused.value)
    assert message.startswith(named) and "is not an async function" in message
    assert f"`{signature}: ...`" in message


def test_a_lambda_returning_a_coroutine_is_refused_with_the_way_out() -> None:
    async def real(event: trio_relay.MessageEvent) -> None:
        pass

    with pytest.raises(TypeError, match="wrap the call in an async def"):
        trio_relay.open_relay(URL, on_message=lambda event: real(event))


def test_something_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="on_message must be an async function, got str"):
        trio_relay.open_relay(URL, on_message="handle")  # type: ignore[arg-type]


class Recorder:
    """A callable object: its ``__call__`` is the async function."""

    def __init__(self) -> None:
        self.texts: list[str | None] = []

    async def __call__(self, event: trio_relay.MessageEvent) -> None:
        self.texts.append(event.text)

    async def method(self, event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
        self.texts.append(event.text)


async def takes_a_prefix(prefix: str, event: trio_relay.MessageEvent) -> None:
    pass


@pytest.mark.parametrize(
    "handler",
    [
        Recorder(),
        Recorder().method,
        functools.partial(takes_a_prefix, "p"),
    ],
    ids=["callable object", "bound method", "partial"],
)
def test_every_async_form_is_accepted(handler: Any) -> None:
    trio_relay.open_relay(URL, on_message=handler)


async def test_a_callable_object_handler_gets_its_messages() -> None:
    recorder = Recorder()
    async with (
        open_connector() as connector,
        trio_relay.open_relay(connector.url, on_message=recorder) as relay,
    ):
        await relay.wait_connected(timeout=10)
        buffer_id = connector.say("C1", "hello")
        with trio.fail_after(10):
            await connector.wait_until(lambda: buffer_id in connector.acks)
    assert recorder.texts == ["hello"]
