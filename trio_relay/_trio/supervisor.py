"""The redial loop: dial → serve → ask the lifecycle → wait → dial.

Every decision (redial or stop, how long to wait, which state follows, what to log and
at which level) is :class:`~trio_relay._core.lifecycle.Lifecycle`'s; this loop carries
them out: it serves one link at a time through :func:`serve_connection`, sleeps the
delay it is given, publishes the state changes and writes the log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext as _no_shield
from dataclasses import dataclass, replace

import trio

from .._core.config import Identity, RelayConfig, UpgradeAuth
from .._core.lifecycle import Change, Lifecycle, Redial
from .._core.state import State
from .._core.stats import RelayStats, counted_task
from .._core.telemetry import DialRecord, Telemetry
from .._core.token import mint_token
from .connection.connection import Connection
from .connection.serve import ConnectionHooks, serve_connection
from .link.dial import Endpoint
from .log_fields import RELAY_NAME

logger = logging.getLogger("trio_relay")


def token_minter(
    auth: UpgradeAuth | None, wall_clock: Callable[[], float]
) -> Callable[[], str | None]:
    """A fresh bearer token per call (``None`` without credentials): one minted before a
    long suspend would be stale by the next dial."""

    def mint() -> str | None:
        if auth is None:
            return None
        return mint_token(auth.gateway_id, auth.secret, ttl=auth.token_ttl, now=wall_clock())

    return mint


TASK_NAME = f"{__name__}.Supervisor.run"
"""The supervisor's task name, made once (trio formats a new string per task otherwise)."""


@dataclass(frozen=True, kw_only=True, eq=False, repr=False, slots=True)
class Supervisor:
    """What the redial loop works with; the relay builds it once."""

    lifecycle: Lifecycle
    publish: Callable[[Change | None], None]
    endpoint: Endpoint
    config: RelayConfig
    stats: RelayStats
    identities: Sequence[Identity]
    mint: Callable[[], str | None]
    hooks: ConnectionHooks
    name: str = ""
    """The relay's name in logs and telemetry."""
    telemetry: Telemetry | None = None

    async def run(self, shield: trio.CancelScope | None = None) -> None:
        """Dial until the lifecycle says stop (revoked, or the relay is closing).
        ``shield``: run inside it (``open_relay`` shields its tasks until shutdown is
        over; a scope taken here costs no wrapper task frame)."""
        # One coroutine level: the loop runs here, not in a helper it awaits (each level
        # of this task's await chain is held by every idle relay for its whole life).
        with counted_task(self.stats), shield or _no_shield():
            # Every record logged by this task and the connections' tasks names the relay.
            RELAY_NAME.set(self.name)
            lifecycle = self.lifecycle
            telemetry = self.telemetry
            while not lifecycle.closing:
                dial = None if telemetry is None else telemetry.dial_started()
                try:
                    end = await serve_connection(
                        endpoint=self.endpoint,
                        config=self.config,
                        stats=self.stats,
                        identities=self.identities,
                        mint_token=self.mint,
                        hooks=self.hooks if dial is None else _reporting_up(self.hooks, dial),
                    )
                except BaseException:
                    if dial is not None:
                        dial.ended(None)  # cancelled: the relay is closing
                    raise
                if dial is not None:
                    dial.ended(end)
                self.stats.last_end_cause = end.cause
                step, changes = lifecycle.after(end)
                for change in changes:
                    self.publish(change)
                if not isinstance(step, Redial):
                    if step.state is State.REVOKED:
                        logger.warning(
                            "relay %s: %s; not dialling again",
                            self.endpoint,
                            step.cause,
                            extra={"cause": step.cause, "close_code": end.code},
                        )
                    return
                logger.log(
                    logging.WARNING if step.warn else logging.INFO,
                    "relay %s: %s; next attempt in %.3g s",
                    self.endpoint,
                    step.note,
                    step.delay,
                    extra={
                        "cause": end.cause,
                        "close_code": end.code,
                        "next_attempt_s": step.delay,
                    },
                )
                if step.delay > 0:
                    await trio.sleep(step.delay)
                # (No sleep(0) for an immediate redial: the dial itself is a checkpoint.)



def _reporting_up(hooks: ConnectionHooks, dial: DialRecord) -> ConnectionHooks:
    """``hooks`` whose ``on_up`` also ends the dial's record (the handshake is done)."""
    on_up = hooks.on_up

    def up(conn: Connection) -> None:
        dial.up()
        on_up(conn)

    return replace(hooks, on_up=up)
