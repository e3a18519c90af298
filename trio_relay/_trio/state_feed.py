"""The relay's state API: `RelayStates`, which [`Relay`][trio_relay.Relay] holds
and delegates ``state``, ``state_changes()``, ``wait_state()`` and ``wait_connected()``
to, and the `StateFeed` under it.

Each subscriber gets every change from the moment it subscribed, in order, as
``(old, new, cause)``. Publishing never waits for a subscriber: each one has a bounded
buffer (`BUFFERED_CHANGES`). A subscriber that falls further behind loses the
*oldest* changes it has not read, and the next change it reads is stitched to the last
one it saw — its ``old`` is the state that subscriber last saw and its cause starts with
``"missed N state changes; "`` — so every subscriber's sequence stays a chain
(``old`` of each item equals ``new`` of the one before) and ends with the relay's
current state. The iterator finishes after it has yielded the change into ``CLOSED``.
"""

from __future__ import annotations

import collections
import logging
import weakref
from collections.abc import AsyncIterator

import trio

from .._core.errors import RelayClosed, RelayRevoked
from .._core.lifecycle import AUTH_ADVICE, Change, Lifecycle, reachable
from .._core.state import State
from .link.dial import Endpoint

logger = logging.getLogger("trio_relay")

BUFFERED_CHANGES = 64
"""Changes kept for a subscriber that is not reading; older ones are dropped."""

_CONNECTED = frozenset({State.CONNECTED})
"""What ``wait_connected`` waits for, made once (the benchmarks' probe calls it per redial)."""


class StateChanges(AsyncIterator[tuple[State, State, str]]):
    """One subscriber's view: ``async for old, new, cause in relay.state_changes()``."""

    def __init__(self, feed: StateFeed, maxlen: int) -> None:
        self._pending: collections.deque[Change] = collections.deque()
        self._maxlen = maxlen
        self._missed = 0
        self._seen = feed.state
        self._wakeup = trio.Event()
        self._done = feed.state is State.CLOSED
        self._feed = feed

    def _push(self, change: Change) -> None:
        if len(self._pending) >= self._maxlen:
            self._pending.popleft()
            self._missed += 1
        self._pending.append(change)
        self._wakeup.set()

    def close(self) -> None:
        """Stop receiving changes (also happens when the iterator is garbage)."""
        if self._feed._subscribers is not None:
            self._feed._subscribers.discard(self)
        self._done = True
        self._wakeup.set()

    def __aiter__(self) -> StateChanges:
        return self

    async def __anext__(self) -> tuple[State, State, str]:
        while not self._pending:
            if self._done:
                raise StopAsyncIteration
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        change = self._pending.popleft()
        cause = change.cause
        if self._missed:
            cause = f"missed {self._missed} state changes; {cause}"
            self._missed = 0
        old, self._seen = self._seen, change.new
        if change.new is State.CLOSED:
            self.close()
        return old, change.new, cause


class StateFeed:
    """The relay's current state and its subscribers."""

    __slots__ = ("_maxlen", "_next_change", "_subscribers", "state")  # no __dict__: one per relay

    def __init__(self, state: State, *, maxlen: int = BUFFERED_CHANGES) -> None:
        self.state = state
        self._maxlen = maxlen
        # Both made when first needed: most relays never have a subscriber, and an
        # idle one waits for no change (each costs bytes in every relay otherwise).
        self._subscribers: weakref.WeakSet[StateChanges] | None = None
        self._next_change: trio.Event | None = None

    @property
    def _changed(self) -> trio.Event:
        """Set at the next change of state."""
        if self._next_change is None:
            self._next_change = trio.Event()
        return self._next_change

    def publish(self, change: Change) -> None:
        self.state = change.new
        if self._subscribers:
            for subscriber in list(self._subscribers):
                subscriber._push(change)
        changed, self._next_change = self._next_change, None
        if changed is not None:
            changed.set()

    def subscribe(self) -> StateChanges:
        subscriber = StateChanges(self, self._maxlen)
        if not subscriber._done:
            if self._subscribers is None:
                self._subscribers = weakref.WeakSet()
            self._subscribers.add(subscriber)
        return subscriber

    async def changed(self) -> None:
        """Wait for the next change of state."""
        await self._changed.wait()

    # ASYNC109: carries Relay.wait_state's timeout=.
    async def wait_for(self, states: frozenset[State], timeout: float | None) -> State:  # noqa: ASYNC109
        """Wait until the state is one of ``states``; see
        [`Relay.wait_state`][trio_relay.Relay.wait_state]."""
        if not states:
            raise ValueError("wait_state needs at least one State")
        with trio.move_on_after(float("inf") if timeout is None else timeout):
            while self.state not in states:
                self.raise_if_unreachable(states)
                await self._changed.wait()
            return self.state
        self.raise_if_unreachable(states)
        wanted = ", ".join(sorted(s.value for s in states))
        raise TimeoutError(
            f"relay not {wanted} within {timeout:g} s (state {self.state.value})"
        )

    def raise_if_unreachable(self, states: frozenset[State]) -> None:
        """Raise if the relay can never reach any of ``states`` from where it is."""
        if reachable(self.state) & states:
            return
        if self.state is State.REVOKED:
            raise RelayRevoked(
                "the connector revoked this gateway's credentials; issue new ones and open "
                "a new relay"
            )
        raise RelayClosed("the relay is closed; open a new one")


class RelayStates:
    """The relay's state as an API: the current state (the lifecycle's), publishing a
    change (logged, then fed to every subscriber), subscriptions and waits.

    One per relay, held by it; the relay's state methods delegate here, so this is the
    one place a change of state is announced.
    """

    # No __dict__: one per relay.
    __slots__ = ("_endpoint", "_lifecycle", "_name", "_url", "feed", "since")

    def __init__(self, lifecycle: Lifecycle, endpoint: Endpoint, url: str, name: str = "") -> None:
        self._name = name
        self._lifecycle = lifecycle
        self._endpoint = endpoint
        self._url = url
        self.feed = StateFeed(lifecycle.state)
        self.since = trio.current_time()
        """When the state last changed (Trio's clock); at first, when the relay was made."""

    @property
    def state(self) -> State:
        return self._lifecycle.state

    def publish(self, change: Change | None) -> None:
        """Log ``change`` and feed it to every subscriber (``None``: nothing changed)."""
        if change is None:
            return
        if logger.isEnabledFor(logging.INFO):  # (else its extra fields are not built)
            logger.info(
                "relay %s: %s -> %s (%s)",
                self._endpoint,
                change.old.value,
                change.new.value,
                change.cause,
                # Named here: the change into CLOSED is published from the caller's task.
                extra={"relay": self._name, "cause": change.cause, "state": change.new.value},
            )
        self.since = trio.current_time()
        self.feed.publish(change)

    def subscribe(self) -> StateChanges:
        """See [`Relay.state_changes`][trio_relay.Relay.state_changes]."""
        return self.feed.subscribe()

    # ASYNC109: carries Relay.wait_state's timeout=.
    async def wait_state(self, states: frozenset[State], timeout: float | None) -> State:  # noqa: ASYNC109
        """See [`Relay.wait_state`][trio_relay.Relay.wait_state]."""
        return await self.feed.wait_for(states, timeout)

    # ASYNC109: carries Relay.wait_connected's timeout=.
    async def wait_connected(self, timeout: float | None) -> None:  # noqa: ASYNC109
        """See [`Relay.wait_connected`][trio_relay.Relay.wait_connected]."""
        try:
            await self.feed.wait_for(_CONNECTED, timeout)
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
            f"{head}, last attempt: {end.cause}); check the URL {self._url} and that the "
            "connector is up"
        )
