"""A hostile connector: frames no honest connector sends, as a table name -> coroutine.

- ``forged_early_result``: ``outbound_result`` frames for the request ids the relay is
  *about* to use, predicted from the last one the connector saw (the next ids of a
  counter, and random ones of the same shape). A result may only settle a request whose
  frame has started to leave; one taken earlier is a forged answer to a request the
  connector never saw.
- ``nan_result``: a result with ``NaN`` in it (not JSON) for a request the connector is
  still working on; it must be rejected like any malformed line, and the real answer
  still delivered.
- ``unknown_platform_descriptor``: a descriptor for a platform the relay never said
  hello for; it must not become one of the relay's descriptors.

Each forged result carries ``"forged": <kind>``, so the requester can tell one that was
taken (:func:`.actors.record` counts it, and :mod:`.invariants` judges it).
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio
import trio_websocket

import trio_relay
from trio_relay.testing import ReferenceConnector, default_descriptor

if TYPE_CHECKING:
    from .state import Soak

__all__ = ["GHOST_PLATFORM", "HOSTILE", "hostile"]

GHOST_PLATFORM = "ghost"
AHEAD = (*range(1, 17), 24, 32, 48, 64, 96, 128, 192, 256, 384)
"""How far past the last id seen the guesses reach: the next few, and as far as a burst
queued behind the writer (the ids issued but not yet sent)."""

Hostile = Callable[["Soak", ReferenceConnector], Awaitable[int]]
"""Send hostile frames to the current session; how many were sent."""


def predict(last: str) -> list[str]:
    """Ids that may come after ``last``: the values :data:`AHEAD` of it as a counter in
    the same hex width (a prefix plus a counter is one), and as many random ones."""
    guesses: list[str] = []
    try:
        value = int(last, 16)
    except ValueError:
        value = None
    if value is not None:
        width = len(last)
        guesses += [f"{value + k:0{width}x}"[-width:] for k in AHEAD]
    guesses += [secrets.token_hex(max(len(last) // 2, 1)) for _ in AHEAD]
    return guesses


def _result_line(request_id: str, kind: str, extra: str = "") -> str:
    """Hand-made, so that it can carry what ``json.dumps`` refuses (``NaN``)."""
    result = '{"success":true,"message_id":"forged","forged":' + json.dumps(kind) + extra + "}"
    head = '{"type":"outbound_result","requestId":' + json.dumps(request_id)
    return head + ',"result":' + result + "}\n"


async def _forged_early_result(soak: Soak, connector: ReferenceConnector) -> int:
    if not soak.last_request_id:
        return 0
    lines = [_result_line(rid, "early") for rid in predict(soak.last_request_id)]
    await connector.inject_raw("".join(lines))
    return len(lines)


async def _nan_result(soak: Soak, connector: ReferenceConnector) -> int:
    if not soak.working_on:
        return 0
    request_id = soak.rng.choice(sorted(soak.working_on))
    await connector.inject_raw(_result_line(request_id, "nan", ',"v":NaN'))
    return 1


async def _unknown_platform_descriptor(soak: Soak, connector: ReferenceConnector) -> int:
    frame = {"type": "descriptor", "descriptor": default_descriptor(GHOST_PLATFORM)}
    await connector.inject_raw(json.dumps(frame) + "\n")
    return 1


HOSTILE: dict[str, Hostile] = {
    "forged_early_result": _forged_early_result,
    "nan_result": _nan_result,
    "unknown_platform_descriptor": _unknown_platform_descriptor,
}


async def hostile(
    soak: Soak, connector: ReferenceConnector, relay: trio_relay.Relay, until: float
) -> None:
    """Until ``until``: every so often (mean ``hostile_interval``), one kind of hostile
    frame to the current session; and each time, a look at whether the relay took a
    ghost platform's descriptor as its own."""
    names = list(HOSTILE)
    while True:
        await trio.sleep(soak.rng.uniform(0.0, 2 * soak.hostile_interval))
        if GHOST_PLATFORM in relay.descriptors:
            soak.ghost_descriptors_taken += 1
        if trio.current_time() >= until:
            return
        session = connector.current
        if session is None or session.silent or not session.is_open:
            continue
        name = soak.rng.choice(names)
        sent = 0
        # The session may end or stall meanwhile (the faults are at work too).
        ended = (RuntimeError, trio.BrokenResourceError, trio_websocket.ConnectionClosed)
        with trio.move_on_after(2), contextlib.suppress(*ended):
            sent = await HOSTILE[name](soak, connector)
        soak.report.hostile[name] += sent
