"""The redial loop: dial → serve → ask the lifecycle → wait → dial.

Every decision (redial or stop, how long to wait, which state follows, what to log and
at which level) is `Lifecycle`'s; this loop carries
them out: it serves one link at a time through `serve_connection`, sleeps the
delay it is given, publishes the state changes and writes the log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext as _no_shield
from dataclasses import dataclass, field, replace

import trio

from .._core.close import ConnectionEnd
from .._core.config import Dialer, Identity, UpgradeAuth
from .._core.idle_cut import IdleCut
from .._core.lifecycle import Change, Lifecycle, Redial, RedialWait
from .._core.settings import ConnectionSettings, DialSettings
from .._core.state import State
from .._core.stats import RelayStats, counted_task
from .._core.telemetry import DialRecord, Telemetry
from .._core.token import mint_token
from .connection.connection import Connection
from .connection.serve import ConnectionHooks, serve_connection
from .link.dial import Endpoint
from .link.ends import ABNORMAL
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


class HoldChanged:
    """Wakes the redial wait when a redial hold is placed or released, so that it looks
    at the hold again (`RedialWait` decides)."""

    __slots__ = ("_event",)  # no __dict__: one per relay

    def __init__(self) -> None:
        self._event: trio.Event | None = None  # made by a waiter: most relays never wait

    def notify(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self) -> None:
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()


@dataclass(frozen=True, kw_only=True, eq=False, repr=False, slots=True)
class Supervisor:
    """What the redial loop works with; the relay builds it once."""

    lifecycle: Lifecycle
    publish: Callable[[Change | None], None]
    endpoint: Endpoint
    dial_settings: DialSettings
    connection_settings: ConnectionSettings
    dialer: Dialer
    """Built once, when the relay opens (``link/dial.py``: ``dialer_for``)."""
    stats: RelayStats
    identities: Sequence[Identity]
    mint: Callable[[], str | None]
    hooks: ConnectionHooks
    idle_cut: IdleCut
    hold_changed: HoldChanged = field(default_factory=HoldChanged)
    name: str = ""
    """The relay's name in logs and telemetry."""
    telemetry: Telemetry | None = None

    def link_ended(self, end: ConnectionEnd, silence: float) -> None:
        """A served link ended (the relay's ``on_end`` hook, before `run` asks the
        lifecycle what next): feed the idle-cut rule ``silence``, the seconds it had
        received nothing before the end."""
        cut = end.code == ABNORMAL and not end.by_us and end.up_for is not None
        step = self.idle_cut.link_ended(cut=cut, silence=silence)
        if step.warning is not None:
            logger.warning("relay %s: %s", self.endpoint, step.warning)
            self.stats.idle_cut_detected = self.idle_cut.cut_after
            self.stats.effective_ping_interval = self.idle_cut.ping_interval
        if step.explained:
            # The cut was learned (and the pings adapted to it): a link it ends is not
            # flapping, so the redial is the one after a healthy link, not a rung up.
            self.lifecycle.backoff.healthy_link_ended()

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
            await self._wait_to_dial(0.0)  # a hold placed before the first dial holds it
            telemetry = self.telemetry
            while not lifecycle.closing:
                interval = self.idle_cut.ping_interval
                dial = None if telemetry is None else telemetry.dial_started()
                try:
                    end = await serve_connection(
                        endpoint=self.endpoint,
                        # The connection pings at the interval of its config: the
                        # adapted one once an idle cut was learned.
                        dial=self.dial_settings,
                        connection=self.connection_settings
                        if interval == self.connection_settings.ping_interval
                        else replace(self.connection_settings, ping_interval=interval),
                        telemetry=telemetry,
                        dialer=self.dialer,
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
                level = logging.WARNING if step.warn else logging.INFO
                if logger.isEnabledFor(level):  # (else its extra fields are not built)
                    logger.log(
                        level,
                        "relay %s: %s; next attempt in %.3g s",
                        self.endpoint,
                        step.note,
                        step.delay,
                        extra={
                            "cause": end.cause,
                            "close_code": end.code,
                            "errno": end.errno,
                            "next_attempt_s": step.delay,
                        },
                    )
                await self._wait_to_dial(step.delay)

    async def _wait_to_dial(self, delay: float) -> None:
        """Wait ``delay`` seconds before the next dial, or, once a redial hold is on
        during the wait, until the hold ends: then dial at once (the hold replaces the
        rest of the backoff wait). Returns at once, without a checkpoint, when there is
        nothing to wait for (the dial itself is one)."""
        wait = RedialWait(trio.current_time() + delay)
        hold = self.lifecycle.hold
        while (wake_at := wait.next_wake(trio.current_time(), hold)) is not None:
            if wait.held:
                logger.info(
                    "relay %s: redial held for %.3g s more",
                    self.endpoint,
                    wake_at - trio.current_time(),
                )
            with trio.move_on_at(wake_at):
                await self.hold_changed.wait()
        if wait.held:
            logger.info("relay %s: redial hold over; dialling now", self.endpoint)



def _reporting_up(hooks: ConnectionHooks, dial: DialRecord) -> ConnectionHooks:
    """``hooks`` whose ``on_up`` also ends the dial's record (the handshake is done)."""
    on_up = hooks.on_up

    def up(conn: Connection) -> None:
        dial.up()
        on_up(conn)

    return replace(hooks, on_up=up)
