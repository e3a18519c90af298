"""Shared helpers for the relay client tests against the reference connector.

The client (``trio_relay.open_relay``) and the connector (``trio_relay.testing``) talk
over real loopback sockets; timed tests run under pytest-trio's ``autojump_clock``
(a ``MockClock`` with ``autojump_threshold=0``), so every number below is *mock* time.

What the helpers observe, and how:

- :class:`Watch` records the mock time of every dial the client starts (a
  ``FaultDialer`` passed through ``RelayConfig(dialer=...)``: it records, then
  delegates to the real dialer) and, through ``relay.state_changes()``, every state
  change of the relay it follows.
- :func:`bearer_tokens` reads the bearer of every upgrade the connector saw.
- ``trio_relay.testing.live_tasks`` and ``open_fds`` (the shared probes) count what is
  left running or open.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
import trio.testing

from trio_relay import Outcome, Relay, RelayConfig, RelayStats, State, StateChanges, open_relay
from trio_relay.testing import FaultDialer, ReferenceConnector

LADDER = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0)
"""The ceilings ``d`` of the default backoff ladder; each wait is uniform in ``[d/2, d]``."""

QUICK = (0.05, 0.1, 0.2, 0.4)
"""The ceilings of the quick retries of refused dials after a healthy link."""

EPSILON = 1e-9
"""Mock time is exact; this only absorbs float rounding of sums."""

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


def chat_event(text: str, message_id: str) -> dict[str, Any]:
    """A wire ``inbound`` event for the default identity (platform ``relay``)."""
    return {
        "text": text,
        "message_id": message_id,
        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"},
    }


class Ceiling(random.Random):
    """A random source whose every ``uniform(a, b)`` is ``b``: pass it as
    ``RelayConfig(rng=Ceiling())`` and each backoff wait is exactly its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def assert_waited(gap: float, ceiling: float) -> None:
    """A backoff wait drawn from ``[ceiling/2, ceiling]``."""
    assert ceiling / 2 - EPSILON <= gap <= ceiling + EPSILON, (
        f"waited {gap:.3f} s, outside [{ceiling / 2:g}, {ceiling:g}]"
    )


@dataclass(frozen=True)
class Transition:
    at: float
    old: State
    new: State
    cause: str


class Watch:
    """Mock times of the client's dials and state changes.

    Open the relay with :meth:`open_relay`; nothing is patched: ``dials`` comes from a
    dialer wrapping the configured one (``RelayConfig(dialer=...)``), and holds the
    ``trio.current_time()`` of each dial attempt, successful or not; ``transitions``
    each state change, read from ``relay.state_changes()`` (mock time stands still
    while a task is runnable, so each is stamped with the time it happened); ``await
    watch.settle()`` before reading them right after a change.
    ``wait_dials``/``wait_state`` block until enough were seen; bound them with
    ``trio.fail_after`` (under the autojump clock a missed condition otherwise spins
    mock time forever).
    """

    def __init__(self) -> None:
        self.dials: list[float] = []
        self.transitions: list[Transition] = []
        self._changed = trio.Event()

    @contextlib.asynccontextmanager
    async def open_relay(self, url: str, **kwargs: Any) -> AsyncIterator[Relay]:
        """``trio_relay.open_relay(url, **kwargs)``, its state changes recorded up to
        and including the change into CLOSED (the block waits for that one), its dials
        recorded by a dialer wrapping the configured one."""
        config = kwargs.pop("config", None) or RelayConfig()
        kwargs["config"] = dataclasses.replace(config, dialer=_DialSpy(self, config))
        async with trio.open_nursery() as nursery, open_relay(url, **kwargs) as relay:
            # Subscribed before the first checkpoint: no change can be missed.
            nursery.start_soon(self._record, relay.state_changes())
            yield relay

    async def _record(self, changes: StateChanges) -> None:
        async for old, new, cause in changes:
            self.transitions.append(Transition(trio.current_time(), old, new, cause))
            self._notify()

    async def settle(self) -> Watch:
        """Let the recorder catch up with every change published so far (it is a task of
        its own: a change made in this very tick is not recorded yet)."""
        await trio.testing.wait_all_tasks_blocked()
        return self

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    @property
    def states(self) -> list[State]:
        return [t.new for t in self.transitions]

    def entered(self, state: State) -> list[Transition]:
        return [t for t in self.transitions if t.new is state]

    async def wait_dials(self, count: int) -> None:
        while len(self.dials) < count:
            await self._changed.wait()

    async def wait_state(self, state: State, count: int = 1) -> Transition:
        """Wait until the client entered ``state`` ``count`` times; the count-th entry."""
        while len(self.entered(state)) < count:
            await self._changed.wait()
        return self.entered(state)[count - 1]


def bearer_tokens(connector: ReferenceConnector) -> list[str | None]:
    """The bearer token of each upgrade the connector saw, in order (``None``: the
    request had no ``Authorization`` header)."""
    tokens: list[str | None] = []
    for session in connector.sessions:
        headers = {name.lower(): value for name, value in session.upgrade_headers}
        value = headers.get(b"authorization")
        if value is None:
            tokens.append(None)
        else:
            scheme, _, token = value.decode("latin-1").partition(" ")
            assert scheme == "Bearer", value
            tokens.append(token)
    return tokens


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """Run ``fn()``; return its result and the mock time it took."""
    start = trio.current_time()
    result = await fn()
    return result, trio.current_time() - start


async def request_into(relay: Relay, outcomes: list[Outcome], action: Any = None) -> None:
    outcomes.append(await relay.request(action or SEND))


class _DialSpy(FaultDialer):
    """Records each dial's mock time in the watch, then dials as configured."""

    def __init__(self, watch: Watch, config: RelayConfig) -> None:
        # The configured dialer, or the real one built from the same config.
        super().__init__(config.dialer, config=config)
        self._watch = watch

    async def __call__(self, endpoint: Any) -> Any:
        self._watch.dials.append(trio.current_time())
        self._watch._notify()
        return await super().__call__(endpoint)


async def first_failed_dial(url: str, proxy_url: str, **config: Any) -> RelayStats:
    """Dial ``url`` through ``proxy_url`` until the first dial fails (backoffs of a
    minute keep it to one); the relay's stats. ``config``: more ``RelayConfig`` fields."""
    settings = RelayConfig(
        proxy=proxy_url,
        close_timeout=0.2,
        backoff_initial=60.0,
        backoff_max=60.0,
        backoff_first_delay=60.0,
        **config,
    )
    async with open_relay(url, config=settings) as relay:
        with trio.fail_after(10):
            while relay.stats.dial_failures < 1:
                await trio.sleep(0.01)
    return relay.stats
