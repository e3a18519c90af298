"""The relay's inbound delivery against the reference connector, for the end-to-end
tests (``test_inbound.py``, ``test_inbound_ordering.py``): a relay on fast reconnects,
a recording handler, a forced reconnect. (Driving the pipeline directly, without
sockets: ``inbound_support.py``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_relay import Relay, open_relay
from trio_relay._core.config import Identity, RelayConfig
from trio_relay._core.event import MessageEvent
from trio_relay.testing import ReferenceConnector

DEADLINE = 15.0
# Reconnects in milliseconds; a short closing handshake keeps each test well under 1 s.
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05, "backoff_first_delay": 0.0,
        "close_timeout": 0.2}


def event(
    platform: Any = "slack", chat: Any = "C1", mid: Any = "m1", text: str = "hi"
) -> dict[str, Any]:
    source: dict[str, Any] = {"platform": platform, "chat_id": chat, "user_id": "U1"}
    ev: dict[str, Any] = {"text": text, "source": source}
    if mid is not None:
        ev["message_id"] = mid
    return ev


@asynccontextmanager
async def relay_to(
    connector: ReferenceConnector, **kwargs: Any
) -> AsyncIterator[Relay]:
    config = RelayConfig(**{**FAST, **kwargs.pop("config", {})})
    async with open_relay(
        connector.url, identities=[Identity("slack", "B1")], config=config, **kwargs
    ) as relay:
        await relay.wait_connected(timeout=DEADLINE)
        yield relay


async def reconnect(connector: ReferenceConnector, relay: Relay, code: int = 1011) -> None:
    """Drop the current session and wait for the relay's next handshake."""
    sessions = connector.handshakes
    await connector.close(code, "test drop")
    await connector.wait_session(sessions + 1)
    await relay.wait_connected(timeout=DEADLINE)


class Handled:
    """An on_message handler recording what it ran; optionally blocks on ``gate``."""

    def __init__(self) -> None:
        self.events: list[MessageEvent] = []
        self.gate: trio.Event | None = None
        self.started = trio.Event()
        self.fail = 0

    async def __call__(self, ev: MessageEvent) -> None:
        self.events.append(ev)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise RuntimeError("handler failed on purpose")

    async def wait(self, n: int) -> None:
        while len(self.events) < n:
            await trio.sleep(0.005)

    @property
    def keys(self) -> list[str | None]:
        return [e.dedupe_key for e in self.events]


async def eventually(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await trio.sleep(0.005)
