"""``open_relay`` under asyncio says it needs Trio and how to start it; AnyIO on the Trio
backend is taken as Trio.

Before, the first Trio call inside failed with "must be called from async context",
which reads like a misplaced ``await``.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest

import trio_relay
from trio_relay.testing import open_connector

URL = "http://127.0.0.1:9"  # never dialled: the refusal comes before any task starts


async def _open_a_relay() -> None:
    async with trio_relay.open_relay(URL):
        pass  # pragma: no cover - never entered


def test_open_relay_under_asyncio_names_trio_and_the_anyio_backend() -> None:
    with pytest.raises(RuntimeError) as refused:
        asyncio.run(_open_a_relay())
    message = str(refused.value)
    assert "needs Trio and is running under asyncio" in message
    assert "trio.run(main)" in message
    assert 'anyio.run(main, backend="trio")' in message


def test_open_relay_under_anyio_on_asyncio_is_refused_the_same_way() -> None:
    with pytest.raises(RuntimeError, match="needs Trio and is running under asyncio"):
        anyio.run(_open_a_relay)


async def _round_trip_in_a_task_group() -> bool:
    async with anyio.create_task_group() as tasks, open_connector() as connector:
        async with trio_relay.open_relay(connector.url) as relay:
            await relay.wait_connected(timeout=10)
            outcome = await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
        tasks.cancel_scope.cancel()
    return outcome.success


def test_anyio_on_the_trio_backend_opens_a_relay_and_sends() -> None:
    assert anyio.run(_round_trip_in_a_task_group, backend="trio") is True
