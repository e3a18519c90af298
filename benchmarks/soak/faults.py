"""The connector's misbehaviours, as a table: fault name -> coroutine.

Each fault is an ``async (Hit) -> bool`` that injects one fault and returns False when
there was nothing to hit (no session up, the listener already down); the injector picks
names from :data:`FAULTS` at random. Adding a fault is adding a row: the report lists
every name of the table.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

import trio_relay
from trio_relay.testing import ReferenceConnector, Session

if TYPE_CHECKING:
    from .state import Soak

__all__ = ["FAULTS", "Fault", "Hit", "injector"]


@dataclass
class Hit:
    """What a fault may act on."""

    soak: Soak
    connector: ReferenceConnector
    relay: trio_relay.Relay
    nursery: trio.Nursery
    """The chaos nursery: a fault's lasting part (an undo later) runs here."""
    burst: Callable[[], None]
    """Start a burst of large requests (see :func:`.actors.spawn_burst`)."""


Fault = Callable[[Hit], Awaitable[bool]]


async def _reset(hit: Hit) -> bool:
    return await _on_session(hit, lambda s: hit.connector.abort(s))


async def _close_1011(hit: Hit) -> bool:
    return await _on_session(hit, lambda s: hit.connector.close(1011, "keepalive ping timeout", s))


async def _close_1001(hit: Hit) -> bool:
    return await _on_session(hit, lambda s: hit.connector.close(1001, "going away", s))


async def _close_1006(hit: Hit) -> bool:
    """TCP FIN without a close frame: the gateway's side reads 1006."""

    async def fin(session: Session) -> None:
        with contextlib.suppress(OSError):
            session.stream.socket.shutdown(socket.SHUT_RDWR)
        with trio.move_on_after(3):
            await session.closed.wait()

    return await _on_session(hit, fin)


async def _silence(hit: Hit) -> bool:
    """No bytes, no pongs, for 0.2-2 s: shorter than the relay's ping timeout about half
    the time (a stall it rides out, with a backlog queued behind it), else a dead peer it
    detects. A burst lands on it."""

    async def silence(session: Session) -> None:
        hit.connector.go_silent(session)
        hit.nursery.start_soon(_resume_later, session, hit.soak.rng.uniform(0.2, 2.0))
        hit.burst()

    return await _on_session(hit, silence)


async def _refuse_upgrades(hit: Hit) -> bool:
    rng = hit.soak.rng
    code, reason = rng.choice(((4401, "unauthorized"), (4401, "expired"), (1013, "try again")))

    async def refuse(session: Session) -> None:
        hit.connector.refuse_upgrades(rng.randint(1, 3), code, reason)
        await hit.connector.close(1012, "service restart", session)

    return await _on_session(hit, refuse)


async def _delay_results(hit: Hit) -> bool:
    rng = hit.soak.rng
    hit.connector.delay_results(rng.uniform(0.05, 1.5))
    hit.nursery.start_soon(_undelay_later, hit.connector, rng.uniform(0.5, 3.0))
    return True


async def _lose_results(hit: Hit) -> bool:
    """Carry out the next 1-5 actions but never send their results: the platform call
    was made, the answer went missing."""
    hit.connector.lose_results(hit.soak.rng.randint(1, 5), where=lambda action: True)
    return True


async def _restart(hit: Hit) -> bool:
    connector, rng = hit.connector, hit.soak.rng
    if not connector.listening:
        return False
    await connector.stop(abort=rng.random() < 0.5)
    await trio.sleep(rng.uniform(0.05, 1.5))
    await connector.start()
    return True


FAULTS: dict[str, Fault] = {
    "reset": _reset,
    "close_1011": _close_1011,
    "close_1001": _close_1001,
    "close_1006": _close_1006,
    "silence": _silence,
    "refuse_upgrades": _refuse_upgrades,
    "delay_results": _delay_results,
    "lose_results": _lose_results,
    "restart": _restart,
}


async def injector(hit: Hit, until: float) -> None:
    """Until ``until``: wait a random gap (mean ``fault_interval``), inject a random
    fault, count it (or count it skipped)."""
    soak = hit.soak
    names = list(FAULTS)
    while True:
        await trio.sleep(soak.rng.uniform(0.1, 2 * soak.fault_interval))
        if trio.current_time() >= until:
            return
        name = soak.rng.choice(names)
        if await FAULTS[name](hit):
            soak.report.faults[name] += 1
        else:
            soak.report.faults_skipped += 1


async def _on_session(hit: Hit, act: Callable[[Session], Awaitable[None]]) -> bool:
    session = hit.connector.current
    if session is None:
        return False
    await act(session)
    return True


async def _resume_later(session: Session, after: float) -> None:
    await trio.sleep(after)
    session.resume()


async def _undelay_later(connector: ReferenceConnector, after: float) -> None:
    await trio.sleep(after)
    connector.delay_results(0)
