"""The state API of :class:`~trio_relay._trio.relay.Relay`, mixed into it: ``state``,
``state_changes()``, ``wait_state()``, ``wait_connected()``, and how a change is
published (logged, then fed to every subscriber)."""

from __future__ import annotations

import logging

from .._core.lifecycle import AUTH_ADVICE, Change, Lifecycle
from .._core.state import State
from .link.dial import Endpoint
from .state_feed import StateChanges, StateFeed

logger = logging.getLogger("trio_relay")


class StateMethods:
    _lifecycle: Lifecycle
    _feed: StateFeed
    _endpoint: Endpoint
    url: str
    name: str

    @property
    def state(self) -> State:
        return self._lifecycle.state

    @property
    def _closing(self) -> bool:
        return self._lifecycle.closing

    def _publish(self, change: Change | None) -> None:
        if change is None:
            return
        logger.info(
            "relay %s: %s -> %s (%s)",
            self._endpoint,
            change.old.value,
            change.new.value,
            change.cause,
            # Named here: the change into CLOSED is published from the caller's task.
            extra={"relay": self.name, "cause": change.cause, "state": change.new.value},
        )
        self._feed.publish(change)

    def state_changes(self) -> StateChanges:
        """Every state change from now on, as ``(old, new, cause)``::

            async for old, new, cause in relay.state_changes():
                ...

        Each call is a subscriber of its own; it ends after the change into ``CLOSED``.
        Publishing never waits for a subscriber: one that falls more than 64 changes
        behind loses the oldest, and the next change it reads starts from the state it
        last saw, with a cause saying how many it missed.
        """
        return self._feed.subscribe()

    async def wait_state(self, *states: State, timeout: float | None = None) -> State:
        """Wait until the relay is in one of ``states`` (at once if it is); returns it.

        Raises ``TimeoutError`` after ``timeout`` seconds, and :class:`RelayRevoked` or
        :class:`RelayClosed` as soon as none of ``states`` can be reached any more.
        """
        return await self._feed.wait_for(frozenset(states), timeout)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until a connection is up (handshake done).

        Raises ``TimeoutError`` after ``timeout`` seconds, :class:`RelayRevoked` if the
        connector revoked us, :class:`RelayClosed` once the relay is closed.
        """
        try:
            await self._feed.wait_for(frozenset({State.CONNECTED}), timeout)
        except TimeoutError:
            raise TimeoutError(self._not_connected_text(timeout)) from None

    def _not_connected_text(self, timeout: float | None) -> str:
        end = self._lifecycle.last_end
        head = f"relay not connected within {timeout:g} s (state {self.state.value}"
        if end is None:
            return f"{head}, no attempt has ended yet); check that the connector is up"
        if end.auth_refused:
            close = f"{end.code} {end.reason or ''}".rstrip()
            return f"{head}, last close {close}); {AUTH_ADVICE}"
        return (
            f"{head}, last attempt: {end.cause}); check the URL {self.url} and that the "
            "connector is up"
        )
