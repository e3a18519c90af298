"""The two implementations behind one small interface, so each benchmark is written once.

A :class:`Backend` knows how to run a coroutine in its own event loop (``trio.run`` or
``asyncio.run``), sleep, run coroutines concurrently, open its relay client and open the
connector's control channel. The benchmark code on top is identical for both, so any
cost of the harness itself (probe loop, bookkeeping) is paid equally by both.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import trio

import trio_relay
from trio_relay.testing import live_tasks

from ._control import AsyncioControl, ConnectorProcess, TrioControl
from .baseline import BaselineConfig, BaselineRelay

__all__ = [
    "ACTION",
    "BACKENDS",
    "Backend",
    "Client",
    "Control",
    "Reply",
    "alternate",
    "recover",
    "run_session",
    "running",
    "wait_dropped",
]

T = TypeVar("T")

ACTION: dict[str, Any] = {"op": "typing", "chat_id": "bench"}
"""The request every benchmark sends: small, answered at once by the connector."""

PROBE_TIMEOUT = 1.0
PAUSE = 0.0005
"""Between two tries of a probe, or two looks at a client's state: the same for both."""
SPIN = 0.002
"""For this long a waiting loop only yields (no timer), so that the ~1 ms granularity of
both event loops' timers does not round sub-millisecond waits up."""

Overrides = dict[str, Any]


class _Runs(Protocol):
    async def run(self) -> None: ...


R = TypeVar("R", bound=_Runs)


@asynccontextmanager
async def running(client: R) -> AsyncIterator[R]:
    """``client`` with its ``run()`` (dial, read, redial) going in a task of its own
    until the block exits; for the Trio clients that are not trio_relay (the peers,
    the floor)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()


class Reply(Protocol):
    """What the benchmarks read of how a request ended. trio_relay's ``Outcome`` and the
    baseline's ``BaselineOutcome`` are replies as they are; the peers and the floor
    client hand out :data:`REPLIES`."""

    @property
    def success(self) -> bool: ...

    @property
    def ambiguous(self) -> bool: ...


@dataclass(frozen=True)
class _Reply:
    success: bool
    ambiguous: bool


REPLIES: dict[tuple[bool, bool], Reply] = {
    (s, a): _Reply(s, a) for s in (False, True) for a in (False, True)
}
"""Every reply there can be, made once: the clients that make their own hand these out
rather than build one per request (0.4 us a request here, charged to no client)."""


class Client(Protocol):
    """What the benchmarks see of a relay client."""

    @property
    def connected(self) -> bool: ...

    @property
    def connects(self) -> int: ...

    @property
    def drops(self) -> int: ...

    async def wait_connected(self, timeout: float) -> None: ...

    def request(self, action: dict[str, Any], timeout: float) -> Awaitable[Reply]:
        """Send ``action``; the awaitable ends with how the request ended. (Not declared
        ``async``: trio_relay's and the baseline's adapters return their library's own
        coroutine rather than wrap it in one more.)"""
        ...


class Control(Protocol):
    async def call(self, cmd: str, **args: Any) -> dict[str, Any]: ...


OnMessage = Callable[[], None]


class Backend(abc.ABC):
    name: str
    loop: str

    @abc.abstractmethod
    def run(self, fn: Callable[[], Awaitable[T]]) -> T: ...

    @abc.abstractmethod
    async def sleep(self, seconds: float) -> None: ...

    @abc.abstractmethod
    async def gather(self, fns: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Run ``fns`` concurrently; their results in order."""

    @abc.abstractmethod
    def client(
        self, url: str, overrides: Overrides, on_message: OnMessage | None = None
    ) -> AbstractAsyncContextManager[Client]: ...

    @abc.abstractmethod
    def control(self, path: str) -> AbstractAsyncContextManager[Control]: ...

    @abc.abstractmethod
    def config(self, overrides: Overrides) -> dict[str, Any]:
        """The full configuration these overrides give, for the JSON report."""

    @abc.abstractmethod
    def tasks_now(self) -> int:
        """Tasks alive in the running event loop (called from inside :meth:`run`)."""


# --- trio_relay ---------------------------------------------------------------------


def relay_config(overrides: Overrides) -> trio_relay.RelayConfig:
    values = dict(overrides)
    keepalive = values.pop("keepalive", None)
    if keepalive is not None:
        values["keepalive"] = trio_relay.KeepaliveConfig(**keepalive)
    return trio_relay.RelayConfig(**values)


class _TrioClient:
    def __init__(self, relay: trio_relay.Relay) -> None:
        self._relay = relay

    @property
    def connected(self) -> bool:
        return self._relay.state is trio_relay.State.CONNECTED

    @property
    def connects(self) -> int:
        return self._relay.stats.connects

    @property
    def drops(self) -> int:
        return sum(self._relay.stats.drops.values())

    async def wait_connected(self, timeout: float) -> None:
        await self._relay.wait_connected(timeout)

    def request(self, action: dict[str, Any], timeout: float) -> Awaitable[Reply]:
        # The relay's own coroutine, not one of ours around it: the caller's task then
        # resumes straight into relay.request, as a user's does. A wrapper's frame is
        # passed through on every resume and return (bench inflight: with K callers
        # woken at once, it was charged to trio_relay K times).
        return self._relay.request(action, timeout=timeout)


class TrioRelayBackend(Backend):
    name = "trio_relay"
    loop = "trio"

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        # Ctrl-C only where the main task waits, never mid-step (see the soak's run).
        return trio.run(fn, restrict_keyboard_interrupt_to_checkpoints=True)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def gather(self, fns: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        results: list[Any] = [None] * len(fns)

        async def one(i: int) -> None:
            results[i] = await fns[i]()

        async with trio.open_nursery() as nursery:
            for i in range(len(fns)):
                nursery.start_soon(one, i)
        return results

    @asynccontextmanager
    async def client(
        self, url: str, overrides: Overrides, on_message: OnMessage | None = None
    ) -> AsyncIterator[Client]:
        handler = None
        if on_message is not None:
            callback = on_message

            async def handler(event: trio_relay.MessageEvent) -> None:
                callback()

        async with trio_relay.open_relay(
            url, on_message=handler, config=relay_config(overrides)
        ) as relay:
            yield _TrioClient(relay)

    @asynccontextmanager
    async def control(self, path: str) -> AsyncIterator[Control]:
        ctl = await TrioControl.connect(path)
        try:
            yield ctl
        finally:
            await ctl.aclose()

    def tasks_now(self) -> int:
        return len(live_tasks())

    def config(self, overrides: Overrides) -> dict[str, Any]:
        config = dataclasses.asdict(relay_config(overrides))
        for name in ("ssl_context", "wall_clock", "rng"):  # not data: left out of the report
            config.pop(name, None)
        return config


# --- the asyncio baseline ----------------------------------------------------------


class _BaselineClient:
    def __init__(self, relay: BaselineRelay) -> None:
        self._relay = relay

    @property
    def connected(self) -> bool:
        return self._relay.connected

    @property
    def connects(self) -> int:
        return self._relay.stats["connects"]

    @property
    def drops(self) -> int:
        return self._relay.stats["drops"]

    async def wait_connected(self, timeout: float) -> None:
        await self._relay.wait_connected(timeout)

    def request(self, action: dict[str, Any], timeout: float) -> Awaitable[Reply]:
        return self._relay.request(action, timeout=timeout)  # (as trio_relay's: no wrapper)


class BaselineBackend(Backend):
    name = "baseline"
    loop = "asyncio"

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        async def main() -> T:
            return await fn()

        return asyncio.run(main())

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def gather(self, fns: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        async def call(fn: Callable[[], Awaitable[Any]]) -> Any:
            return await fn()

        return list(await asyncio.gather(*(call(fn) for fn in fns)))

    @asynccontextmanager
    async def client(
        self, url: str, overrides: Overrides, on_message: OnMessage | None = None
    ) -> AsyncIterator[Client]:
        # The baseline has no message handler: its reader acks on receipt.
        async with BaselineRelay(url, BaselineConfig(**overrides)) as relay:
            yield _BaselineClient(relay)

    @asynccontextmanager
    async def control(self, path: str) -> AsyncIterator[Control]:
        ctl = await AsyncioControl.connect(path)
        try:
            yield ctl
        finally:
            await ctl.aclose()

    def tasks_now(self) -> int:
        return len(asyncio.all_tasks())

    def config(self, overrides: Overrides) -> dict[str, Any]:
        return dataclasses.asdict(BaselineConfig(**overrides))


TRIO_RELAY = TrioRelayBackend()
BASELINE = BaselineBackend()
BACKENDS: tuple[Backend, Backend] = (TRIO_RELAY, BASELINE)


def alternate(round_index: int) -> tuple[Backend, Backend]:
    """A/B on even rounds, B/A on odd ones, so drift hits both alike."""
    return BACKENDS if round_index % 2 == 0 else (BASELINE, TRIO_RELAY)


# --- the harness, shared by every benchmark ------------------------------------------


def run_session(
    backend: Backend,
    proc: ConnectorProcess,
    overrides: Overrides,
    body: Callable[[Client, Control], Awaitable[T]],
    *,
    on_message: OnMessage | None = None,
    connect_timeout: float = 15.0,
) -> T:
    """In a fresh event loop of ``backend``: open the control channel and a client,
    wait until it is connected, run ``body``, close both."""
    proc.check_alive()

    async def main() -> T:
        async with (
            backend.control(proc.control_path) as ctl,
            backend.client(proc.url, overrides, on_message) as client,
        ):
            await client.wait_connected(connect_timeout)
            return await body(client, ctl)

    return backend.run(main)


async def _pause(backend: Backend, since: float) -> None:
    if time.monotonic() - since < SPIN:
        await backend.sleep(0)
    else:
        await backend.sleep(PAUSE)


async def recover(
    backend: Backend, client: Client, connects_before: int, *, limit: float = 30.0
) -> float:
    """Wait until a probe request succeeds on a connection newer than the one counted in
    ``connects_before``; returns the ``time.monotonic()`` of that success.

    While the client is between connections the loop waits on its own connected signal
    (no polling, so no timer granularity); while it still believes in the old connection
    it looks again after :data:`PAUSE` (after a short yield-only spin).
    """
    start = time.monotonic()
    deadline = start + limit
    while True:
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"{backend.name}: no successful probe within {limit:g} s")
        if client.connected:
            if client.connects > connects_before:
                reply = await client.request(ACTION, PROBE_TIMEOUT)
                if reply.success:
                    return time.monotonic()
            await _pause(backend, start)
        else:
            try:
                await client.wait_connected(deadline - now)
            except TimeoutError:
                continue


async def wait_dropped(backend: Backend, client: Client, *, limit: float) -> float | None:
    """Wait until the client no longer counts itself connected; the monotonic time it
    was seen, or None after ``limit`` seconds."""
    start = time.monotonic()
    while client.connected:
        if time.monotonic() - start > limit:
            return None
        await _pause(backend, start)
    return time.monotonic()
