"""Shared helpers for the live-card, task-card and format-hint tests (issue 21).

A relay with one identity on a chosen platform talks to the reference connector over
loopback; :class:`Wire` stamps every ``outbound`` action the connector receives with
the (mock) time it arrived, through the connector's public ``on_frame`` observer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from trio_relay import Identity, Relay, RelayConfig, open_relay
from trio_relay.testing import JsonObject, ReferenceConnector, Session, open_connector

EPSILON = 1e-9
"""Mock time is exact; this only absorbs float rounding of sums."""


@dataclass
class Wire:
    """Every outbound action the connector received, with its arrival time."""

    t0: float = 0.0
    actions: list[tuple[float, JsonObject]] = field(default_factory=list)

    def observe(self, session: Session, direction: Literal["in", "out"], frame: Any) -> None:
        wire = frame.to_wire()
        if direction == "in" and wire.get("type") == "outbound":
            self.actions.append((trio.current_time() - self.t0, wire["action"]))

    def ops(self, *ops: str) -> list[JsonObject]:
        """The actions of ``ops`` (all but ``typing`` when none are named), in order."""
        return [a for _, a in self.actions if (a["op"] in ops if ops else a["op"] != "typing")]

    def timed(self, *ops: str) -> list[tuple[float, JsonObject]]:
        return [(round(t, 6), a) for t, a in self.actions if a["op"] in ops]


@asynccontextmanager
async def live_relay(
    platform: str,
    descriptor: JsonObject,
    *,
    config: RelayConfig | None = None,
) -> AsyncIterator[tuple[ReferenceConnector, Relay, Wire]]:
    """A connected relay fronting ``platform``, whose descriptor has ``descriptor``'s
    keys; the wire's clock starts once it is connected."""
    wire = Wire()
    async with (
        open_connector(descriptors={platform: descriptor}, on_frame=wire.observe) as connector,
        open_relay(
            connector.url, identities=[Identity(platform, "B1")], config=config
        ) as relay,
    ):
        await relay.wait_connected(5)
        wire.t0 = trio.current_time()
        yield connector, relay, wire
