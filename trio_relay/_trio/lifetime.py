"""``open_relay``: one nursery for the client's whole life, and what leaves it.

::

    open_relay()                    relay nursery
     ├── supervisor                 dial → serve (and run the connection's timer)
     │    │                         → ask the lifecycle → wait → dial
     │    └── connection nursery    reader; writer only during a burst
     │                              (see connection/connection.py)
     └── inbound pipeline           handlers, never on the reader (see inbound/pipeline.py)

The parts are made on entering the ``async with`` (in the Trio run), in order, each
given the ones it uses: the token minter, the connector's HTTP routes, the acks (where
the pipeline's acks leave), the pipeline, the relay (which points the acks at each new
connection).

Leaving the ``async with`` block stops new requests, drains in-flight ones for at most
``drain_timeout``, closes the socket with 1000 and cancels the rest, so no task outlives
the block. What the block raised comes out exactly as raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType

import sniffio
import trio

from .._core.config import Identity, RelayConfig, UpgradeAuth
from .._core.endpoint import Endpoint
from .._core.event import MessageEvent
from .._core.handler_signature import check_async_handler
from .._core.media import ConnectorRoutes
from .._core.passthrough import PassthroughForward
from .._core.policy import RelevancePolicy
from .._core.settings import InboundSettings, RoutesSettings
from .._core.state import State
from .._core.stats import RelayStats
from .._core.url import normalize_url
from .adapter.plane import bind_relay
from .inbound.acks import RelayAcks
from .inbound.pipeline import (
    DeadLetterHandler,
    InboundPipeline,
    InterruptHandler,
    MessageHandler,
    PassthroughHandler,
)
from .relay import Relay
from .routes.client import ConnectorHttp
from .routes.media import RelayMedia, with_media_downloads
from .routes.policy import declare_policy
from .supervisor import TASK_NAME as SUPERVISOR_TASK
from .supervisor import token_minter

DEFAULT_IDENTITIES = (Identity("relay", ""),)
"""Without ``identities``: one, for platform ``relay`` (immutable: one for all relays)."""

PIPELINE_TASK = f"{InboundPipeline.__module__}.InboundPipeline.run"
"""Task names made once (trio formats a new string per task otherwise)."""


def open_relay(
    url: str,
    *,
    identities: Sequence[Identity] | None = None,
    auth: UpgradeAuth | None = None,
    on_message: MessageHandler | Callable[[MessageEvent, Relay], Awaitable[None]] | None = None,
    on_interrupt: InterruptHandler | Callable[[str, str, Relay], Awaitable[None]] | None = None,
    on_passthrough: PassthroughHandler
    | Callable[[PassthroughForward, Relay], Awaitable[None]]
    | None = None,
    on_dead_letter: DeadLetterHandler | None = None,
    config: RelayConfig | None = None,
    policy: RelevancePolicy | None = None,
) -> AbstractAsyncContextManager[Relay]:
    """Open a relay to the connector at ``url`` for the duration of the block.

    Returns at once; the first dial happens in the background (``await
    relay.wait_connected()`` to wait for it). Leaving the block drains in-flight
    requests for at most ``config.drain_timeout`` seconds, closes the socket with 1000 and
    cancels everything else: no task outlives it. An exception raised in the block comes
    out as itself, not wrapped in an exception group.

    Handlers are ``async def`` functions; each may take the
    [`Relay`][trio_relay.Relay] as one more, last argument (``on_message(event, relay)``),
    decided once from its signature. A handler that is not ``async`` is refused here with
    a ``TypeError``. Deliveries are deduplicated before ``on_message`` or
    ``on_passthrough`` runs, and acked when it returns; one that raises is retried
    (``config.max_delivery_attempts`` in all) before it becomes a dead letter.

    Args:
        url: The connector's base URL (``https://connector.example``): ``http``/``https``
            become ``ws``/``wss`` (``ws``/``wss`` are kept), and ``/relay`` is appended
            unless the path ends with it.
        identities: The bot identities this gateway fronts, one
            [`Identity`][trio_relay.Identity] (one ``hello``) each. Default: one for
            platform ``relay``.
        auth: The gateway id and shared secret of the upgrade's bearer token
            ([`UpgradeAuth`][trio_relay.UpgradeAuth]); ``None`` dials without one (a
            connector with authentication off). The gateway id also names the relay in
            logs and namespaces its dedupe keys.
        on_message: ``async (event) -> None`` or ``async (event, relay) -> None``, called
            once per user message (a [`MessageEvent`][trio_relay.MessageEvent]), in order
            within a chat. Presses that answer [`Relay.ask`][trio_relay.Relay.ask] never
            reach it. ``None``: messages are acked unhandled (a
            warning is logged once).
        on_interrupt: ``async (session_key, chat_id) -> None`` (or with the relay
            last), called when a user asks to stop a turn (``interrupt_inbound``);
            [`Relay.interrupt`][trio_relay.Relay.interrupt] is the other way round.
        on_passthrough: ``async (forward) -> None`` (or with the relay last), called once
            per forwarded platform webhook (a
            [`PassthroughForward`][trio_relay.PassthroughForward]).
        on_dead_letter: ``async (dead_letter) -> None``, called with a
            [`DeadLetter`][trio_relay.DeadLetter] for a delivery given up on (its handler
            failed every attempt, or its payload could not be decoded). Without it, dead
            letters are logged and counted (``relay.stats``).
        config: Timeouts, limits, keepalive, the dialer, dedupe and telemetry
            ([`RelayConfig`][trio_relay.RelayConfig]); default ``RelayConfig()``.
        policy: A [`RelevancePolicy`][trio_relay.RelevancePolicy], declared to the
            connector once, after the first handshake (``POST /relay/policy``); a failure
            is logged as a warning and the relay runs on; an all-default policy is not
            sent.

    Returns:
        An async context manager whose ``async with`` gives the running
        [`Relay`][trio_relay.Relay]; it can be entered once.

    Raises:
        TypeError: A handler is not an ``async def`` function (when called).
        RuntimeError: The block is entered outside Trio (under asyncio).
    """
    # A handler written without ``async`` is refused here, where the mistake is made,
    # not on each delivery (which would run its side effects, then fail to await it).
    check_async_handler("on_message", on_message, "event")
    check_async_handler("on_interrupt", on_interrupt, "session_key, chat_id")
    check_async_handler("on_passthrough", on_passthrough, "forward")
    check_async_handler("on_dead_letter", on_dead_letter, "dead_letter")
    config = config or RelayConfig()

    def make() -> tuple[_Late, InboundPipeline, ConnectorHttp]:
        # At the entry, in the Trio run (the relay reads its clock as it is made), from
        # the arguments given here: the parts in order, each given the ones it uses.
        stats = RelayStats()
        late = _Late()
        name = (
            auth.gateway_id if auth is not None else Endpoint.from_url(normalize_url(url)).host
        )
        # Made once per relay; None (the default) leaves every call site one `is None` test.
        telemetry = (
            None if config.telemetry is None else config.telemetry.for_relay(name, late.state)
        )
        mint = token_minter(auth, config.wall_clock)  # a fresh token per dial and route call
        # The connector's HTTP routes (media, policy), minting a fresh token per request.
        routes = RoutesSettings.from_config(config)
        routes_http = ConnectorHttp(ConnectorRoutes.from_relay_url(url), mint, routes, name)
        media = RelayMedia(routes_http, routes)
        # Handlers may take the relay as one more argument (``async def on_message(event,
        # relay)``); decided once, here, from the user's own signature, before any
        # wrapper hides it.
        message_handler = bind_relay(on_message, 1, late.get_relay)
        if config.download_media and message_handler is not None:
            message_handler = with_media_downloads(message_handler, media)

        acks = RelayAcks(stats)
        pipeline = InboundPipeline(
            settings=InboundSettings.from_config(config),
            stats=stats,
            on_message=message_handler,
            on_interrupt=bind_relay(on_interrupt, 2, late.get_relay),
            on_passthrough=bind_relay(on_passthrough, 1, late.get_relay),
            on_dead_letter=on_dead_letter,
            acks=acks,
            namespace=auth.gateway_id if auth is not None else "",
            name=name,
            telemetry=telemetry,
        )
        relay = late.relay = Relay(
            url,
            identities=identities if identities is not None else DEFAULT_IDENTITIES,
            mint=mint,
            config=config,
            pipeline=pipeline,
            acks=acks,
            stats=stats,
            name=name,
            telemetry=telemetry,
        )
        relay.media = media
        return late, pipeline, routes_http

    return _RelayRun(make, config, policy)


class _RelayRun:
    """What ``open_relay`` returns: the relay for the duration of one ``async with``
    (made and its tasks started on entry, shut down on exit).

    A class rather than an ``@asynccontextmanager`` generator: the generator stayed
    suspended for the relay's whole life, holding every local of the setup, with
    contextlib's wrapper and Trio's registration of each live async generator beside it;
    this holds what the exit needs and nothing else (an idle relay: 22,000 -> 21,377
    bytes, tracemalloc over 300; RSS 22.6 -> 22.0 KiB, ``bench memory``)."""

    __slots__ = ("_config", "_late", "_make", "_nursery_manager", "_policy", "_routes_http")

    def __init__(
        self,
        make: Callable[[], tuple[_Late, InboundPipeline, ConnectorHttp]],
        config: RelayConfig,
        policy: RelevancePolicy | None,
    ) -> None:
        self._make: Callable[[], tuple[_Late, InboundPipeline, ConnectorHttp]] | None = make
        self._config = config
        self._policy = policy
        self._late: _Late | None = None
        self._routes_http: ConnectorHttp | None = None
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> Relay:
        # Under asyncio (anyio.run's default backend) the first Trio call failed with
        # "must be called from async context", which reads like a misplaced await.
        library = sniffio.current_async_library()
        if library != "trio":
            raise RuntimeError(
                f"open_relay needs Trio and is running under {library}: start the program "
                f'with trio.run(main), or from AnyIO code with anyio.run(main, backend="trio")'
            )
        make, config = self._make, self._config
        if make is None:
            raise RuntimeError("an open_relay(...) can be entered once; call open_relay again")
        self._make = None  # (the arguments are not held for the relay's life)
        late, pipeline, routes_http = make()
        self._late, self._routes_http = late, routes_http
        relay = late.relay
        assert relay is not None
        manager = self._nursery_manager = trio.open_nursery()
        nursery = await manager.__aenter__()
        # Our tasks are shielded from a cancellation of the caller's scope until the
        # shutdown is over: the drain and the closing handshake need the reader. Each
        # task enters its scope itself (no wrapper frame per task), made as the task
        # starts (an idle relay may never start its pipeline's).
        late.nursery = nursery
        try:
            if config.dedupe_store is None and config.dedupe_path is None:
                # The in-memory store has nothing to load: the pipeline's task starts
                # with the first inbound frame, so an idle relay does without it.
                pipeline.start_on_first_frame(late.start_pipeline)
            else:
                late.start_pipeline()  # a durable store is opened (and its keys loaded) now
            late.start_shielded(relay._supervisor.run, SUPERVISOR_TASK)
            if self._policy is not None:
                nursery.start_soon(declare_policy, relay, routes_http, self._policy)
        except BaseException as exc:
            # Nothing above awaits: only a bug of ours gets here. Nothing has run that
            # needs a drain; what started is cancelled and the error leaves as raised.
            for scope in late.shields:
                scope.cancel()
            nursery.cancel_scope.cancel()
            escaped = await self._leave_nursery(exc, exc)
            if escaped is not None and escaped is not exc:
                raise escaped from None
            raise
        return relay

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        raised_in_block: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        late, config, routes_http = self._late, self._config, self._routes_http
        assert late is not None and routes_http is not None
        relay, nursery = late.relay, late.nursery
        assert relay is not None and nursery is not None
        # What leaves the nursery's body: what the block raised, or what the shutdown
        # raised over it (chained to it: this runs while it is being handled).
        leaving = raised_in_block
        try:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(config.drain_timeout + config.close_timeout + 1):
                    await relay._shutdown()
                with trio.move_on_after(config.close_timeout):
                    await routes_http.aclose()
            for scope in late.shields:
                scope.cancel()
            nursery.cancel_scope.cancel()
        except BaseException as exc:
            leaving = exc
        escaped = await self._leave_nursery(leaving, raised_in_block)
        if escaped is None:
            # Nothing leaves: a block's exception the nursery absorbed stays absorbed.
            return raised_in_block is not None
        if escaped is raised_in_block:
            return False  # it leaves as itself, with its own traceback
        # Raised here, outside any except clause: raising it inside one would make the
        # group its __context__, overwriting whatever the block had chained to it.
        raise escaped

    async def _leave_nursery(
        self, leaving: BaseException | None, raised_in_block: BaseException | None
    ) -> BaseException | None:
        """Exit the relay's nursery with ``leaving`` (None: the body ended plainly) and
        mark the relay closed; what must leave ``open_relay``, if anything. A group the
        nursery raises is re-raised unless `_as_raised` names what leaves instead."""
        manager, late = self._nursery_manager, self._late
        assert manager is not None and late is not None and late.relay is not None
        relay = late.relay
        try:
            await manager.__aexit__(
                None if leaving is None else type(leaving),
                leaving,
                None if leaving is None else leaving.__traceback__,
            )
        except BaseExceptionGroup as group:
            escaped = _as_raised(group, raised_in_block)
            if escaped is None:
                raise
            return escaped
        finally:
            relay._closed()
        # Trio's nursery returns only when nothing is left to raise: an exception of
        # the body it absorbed (a Cancelled of its own scope) does not leave.
        return None


class _Late:
    """What only exists once the relay and its nursery do: the relay that handlers
    taking it get (the handlers are the pipeline's, made before the relay), and the
    nursery the relay's tasks start in. Bound methods of one slotted object: a closure
    for each would cost about 200 bytes in every relay, for its whole life."""

    __slots__ = ("nursery", "relay", "shields")

    def __init__(self) -> None:
        self.relay: Relay | None = None
        self.nursery: trio.Nursery | None = None
        self.shields: list[trio.CancelScope] = []

    def state(self) -> State | None:
        return self.relay.state if self.relay is not None else None

    def get_relay(self) -> Relay:
        assert self.relay is not None  # handlers run only once the relay exists
        return self.relay

    def start_shielded(
        self, task: Callable[[trio.CancelScope], Awaitable[None]], name: str
    ) -> None:
        """Start ``task(shield)`` in the relay's nursery; ``shield`` stays up until the
        relay's shutdown is over (then open_relay cancels it)."""
        assert self.nursery is not None
        shield = trio.CancelScope(shield=True)
        self.shields.append(shield)
        self.nursery.start_soon(task, shield, name=name)

    def start_pipeline(self) -> None:
        self.start_shielded(self.get_relay()._pipeline.run, PIPELINE_TASK)


def _as_raised(
    group: BaseExceptionGroup[BaseException], raised_in_block: BaseException | None
) -> BaseException | None:
    """What should leave ``open_relay`` in place of ``group``, if not the group itself.

    Our own tasks raise nothing but KeyboardInterrupt or SystemExit (a handler raised
    it): that one comes out as itself, since the caller asked to stop. Otherwise a group
    of one wraps the block's own exception, which comes out as the very object raised:
    the nursery's cancel scope hands us a *copy* of a group the block raised (it splits
    Cancelled out of it), so the block's exception is kept aside as it passes.
    """
    stop: BaseException | None = group.split((KeyboardInterrupt, SystemExit))[0]
    # split() copies the groups around them, never the leaves: this is the raised one.
    while isinstance(stop, BaseExceptionGroup):
        stop = stop.exceptions[0]
    if stop is not None:
        return stop
    if len(group.exceptions) == 1:
        sole: BaseException = group.exceptions[0]
        if raised_in_block is None or isinstance(raised_in_block, trio.Cancelled):
            # The block was cancelled because one of our tasks failed (the nursery
            # absorbed that Cancelled): the failure is what the caller must see, not
            # a Cancelled from a scope that is gone.
            return sole
        return raised_in_block
    return None
