"""The reference connector: a real WebSocket server speaking the connector side of
docs/protocol.md, with every fault a gateway must survive one method call away.

It serves tests (the library's and its users'), the benchmarks and the
``trio-relay connector`` command, so it is built like a real server, not a mock: real
TCP on loopback, real trio-websocket framing, replies batched through the same
`Outbox` the gateway uses, frames decoded with the same
sans-I/O codec. What makes it a *testing* connector is that it records what it saw and
lets the caller misbehave on purpose: close with any code, reset TCP, fall silent, delay,
withhold or drop results, refuse or revoke authentication, stop and restart listening.

Structure: `ConnectorProtocol` (what frames mean, what is recorded)
is the base; [`ReferenceConnector`][trio_relay.testing.ReferenceConnector] adds the listener, the
live sessions and the
fault controls. Each TCP connection is a [`Session`][trio_relay.testing.Session] with its own
nursery; the listener and all sessions live in the nursery of
[`open_connector`][trio_relay.testing.open_connector].
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import trio
from wsproto.utilities import LocalProtocolError

from .._core.close import AUTH_CLOSE_CODE
from .._core.frames import InboundFrame, InterruptInbound
from ._faults import ActionMatch
from ._http_routes import HttpRoutes
from ._options import ConnectorOptions, takes_options
from ._protocol import ConnectorProtocol, JsonObject
from ._session import CLOSE_TIMEOUT, Session

logger = logging.getLogger("trio_relay.testing.connector")

GOING_AWAY = 1001
MAX_QUEUED_FRAMES = 1 << 20


class ReferenceConnector(ConnectorProtocol):
    """A running connector; obtain one from [`open_connector`][trio_relay.testing.open_connector].

    Fault methods and live sends act on the *current* session (the latest one still
    open) unless given a ``session``, and raise ``RuntimeError`` when there is none.
    ``kills`` holds the ``time.monotonic()`` of every fault injected (close, abort,
    go_silent, revoke of a connected gateway, stop), for benchmarks that time the
    gateway's reaction.
    """

    def __init__(self, nursery: trio.Nursery, options: ConnectorOptions) -> None:
        super().__init__(options)
        self._nursery = nursery
        self._host = options.host
        self.port = options.port
        """The port it listens on (the one picked, after a start with port 0)."""
        self.max_message_bytes = options.max_message_bytes
        """The largest WebSocket message it accepts."""
        self.ssl_context = options.ssl_context
        """Server-side TLS for every session (``https``/``wss`` URLs) when set."""
        self.kills: list[float] = []
        """The ``time.monotonic()`` of every fault injected, in order."""
        self.routes = HttpRoutes(
            secrets=options.secrets, clock=options.clock, base_url=lambda: self.url
        )
        """The HTTP routes on the same port (media, policy): records and faults."""
        self._live: set[Session] = set()  # every TCP connection being served, any stage
        self._listen_scope: trio.CancelScope | None = None
        self._listening_done = trio.Event()

    # --- addresses and state ----------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL a gateway is configured with (it appends ``/relay`` itself)."""
        return f"{'https' if self.ssl_context else 'http'}://{self._netloc}"

    @property
    def ws_url(self) -> str:
        """The WebSocket URL the relay dials (``ws://host:port/relay``)."""
        return f"{'wss' if self.ssl_context else 'ws'}://{self._netloc}/relay"

    @property
    def _netloc(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self.port}"

    @property
    def current(self) -> Session | None:
        """The latest session still open (refused upgrades never count)."""
        for session in reversed(self.sessions):
            if session.is_open:
                return session
        return None

    @property
    def listening(self) -> bool:
        """Whether it listens now (between [`start`][trio_relay.testing.ReferenceConnector.start]
        and [`stop`][trio_relay.testing.ReferenceConnector.stop])."""
        return self._listen_scope is not None

    @property
    def results_dropped(self) -> int:
        """Results never sent: dropped on purpose, or released onto a closed session."""
        return self.results.dropped

    # --- live frames ------------------------------------------------------------------

    async def send_inbound(self, event: JsonObject, *, session: Session | None = None) -> None:
        """Send ``event`` (an inbound event object, as
        [`buffer_inbound`][trio_relay.testing.ReferenceConnector.buffer_inbound] takes) as a
        live, unbuffered ``inbound`` on ``session``; returns once it was handed to the
        socket (or the session ended first, in which case it is lost)."""
        target = self._target(session)
        self.chats.saw_inbound(event, target.gateway_id)
        await target.send_and_wait(InboundFrame(event))

    async def send_interrupt(
        self, session_key: str, chat_id: str, *, session: Session | None = None
    ) -> None:
        """Send an ``interrupt_inbound``: a user asked to stop the turn of ``session_key``
        in ``chat_id``, on ``session``; the relay calls its ``on_interrupt``."""
        await self._target(session).send_and_wait(InterruptInbound(session_key, chat_id))

    async def inject_raw(
        self, text: str | bytes, *, session: Session | None = None, as_text: bool = False
    ) -> None:
        """Send ``text``, one WebSocket message, verbatim on ``session`` (a text message
        for ``str``, binary for ``bytes``), not batched with other frames: for
        malformed-frame tests. ``as_text=True`` sends ``bytes`` as a *text* message's
        payload, unchecked: a text message that is not UTF-8, which the gateway must fail
        with 1007."""
        await self._target(session).send_raw(text, text=as_text)

    # --- faults -----------------------------------------------------------------------

    def _target(self, session: Session | None) -> Session:
        target = session if session is not None else self.current
        if target is None:
            raise RuntimeError("the reference connector has no open session")
        return target

    async def close(self, code: int, reason: str = "", session: Session | None = None) -> None:
        """Close the session's WebSocket with ``code`` and ``reason``; returns when it is
        over."""
        target = self._target(session)
        self.kills.append(time.monotonic())
        target.request_close(code, reason)
        await target.closed.wait()

    async def abort(self, session: Session | None = None) -> None:
        """Reset ``session``'s TCP connection (RST); the gateway sees no close frame."""
        target = self._target(session)
        self.kills.append(time.monotonic())
        target.abort()
        await target.closed.wait()

    def go_silent(self, session: Session | None = None) -> None:
        """Stop reading, writing and answering pings on ``session``, keeping TCP open: a
        stalled peer."""
        target = self._target(session)
        self.kills.append(time.monotonic())
        target.silence()

    def ignore_pings(self, session: Session | None = None, *, ignore: bool = True) -> None:
        """Answer no ping on ``session`` (the pongs are swallowed) while everything else
        flows: a busy peer that never pongs. ``ignore=False`` undoes it."""
        self._target(session).ignore_pings(ignore)

    def resume_session(self, session: Session | None = None) -> None:
        """Undo [`go_silent`][trio_relay.testing.ReferenceConnector.go_silent] on ``session``;
        bytes that arrived meanwhile are processed then."""
        self._target(session).resume()

    def delay_results(self, seconds: float) -> None:
        """Send each later ``outbound_result`` ``seconds`` after it was ready (0: off)."""
        self.results.delay = seconds

    def withhold_results(self) -> None:
        """Hold ``outbound_result`` frames until
        [`release_results`][trio_relay.testing.ReferenceConnector.release_results]."""
        self.results.withholding = True

    def release_results(self) -> None:
        """Send every withheld result (to sessions still open) and stop withholding."""
        self.results.release()

    def drop_results(self, drop: bool = True) -> None:
        """Never answer ``outbound`` frames while ``drop`` is set."""
        self.results.dropping = drop

    def lose_results(self, count: int = 1, *, where: ActionMatch) -> None:
        """Carry out the next ``count`` actions for which ``where(action)`` holds, but
        never send their results: the gateway's requests end ambiguous (at their
        timeout). E.g. ``where=lambda a: a.get("final") is True`` loses a seal's."""
        self.results.lose(count, where)

    def revoke(self, gateway_id: str) -> None:
        """Close ``gateway_id``'s sessions with 4401 "revoked"; its future upgrades are
        refused with 4401 "unauthorized"."""
        self.upgrades.revoked.add(gateway_id)
        targets = [s for s in self._live if s.gateway_id == gateway_id and s.is_open]
        if targets:
            self.kills.append(time.monotonic())
        for session in targets:
            session.request_close(AUTH_CLOSE_CODE, "revoked")

    def unrevoke(self, gateway_id: str) -> None:
        """Undo [`revoke`][trio_relay.testing.ReferenceConnector.revoke]: accept
        ``gateway_id``'s upgrades again."""
        self.upgrades.revoked.discard(gateway_id)

    def refuse_upgrades(
        self, count: int, code: int = AUTH_CLOSE_CODE, reason: str = "unauthorized"
    ) -> None:
        """Accept the next ``count`` upgrades, then close each at once with ``code`` and
        ``reason``."""
        self.upgrades.refuse_next(count, code, reason)

    # --- listening --------------------------------------------------------------------

    async def start(self) -> None:
        """Listen (again) on ``port``; the first start with port 0 picks one."""
        if self._listen_scope is not None:
            raise RuntimeError("the reference connector is already listening")
        await self._nursery.start(self._listen)

    async def stop(self, *, abort: bool = True) -> None:
        """Stop listening and end every session: a reset if ``abort``, else a 1001
        close. Returns once every session is over;
        [`start`][trio_relay.testing.ReferenceConnector.start] listens again."""
        self.kills.append(time.monotonic())
        await self._shutdown(abort=abort)

    async def serve_forever(self) -> NoReturn:
        """Keep serving until cancelled (for the ``trio-relay connector`` command)."""
        await trio.sleep_forever()

    async def _shutdown(self, *, abort: bool) -> None:
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            await self._listening_done.wait()
        live = list(self._live)
        for session in live:
            if abort:
                session.abort()
            else:
                session.request_close(GOING_AWAY, "going away")
        for session in live:
            await session.closed.wait()

    async def _listen(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._listening_done = trio.Event()
        listeners = await trio.open_tcp_listeners(self.port, host=self._host)
        try:
            self.port = listeners[0].socket.getsockname()[1]
            with trio.CancelScope() as scope:
                self._listen_scope = scope
                task_status.started()
                # Sessions go to the connector's nursery, not the listener's, so that
                # stop() can end them its own way (RST or 1001) after listening stops.
                await trio.serve_listeners(self._serve, listeners, handler_nursery=self._nursery)
        finally:
            # No await in here: a checkpoint in a cancelled task would raise before the
            # event is set, and stop() would wait for it forever.
            self._listen_scope = None
            for listener in listeners:
                listener.socket.close()
            self._listening_done.set()

    async def _serve(self, stream: trio.SocketStream) -> None:
        session = Session(
            -1,  # numbered when its upgrade is accepted
            stream,
            max_message_bytes=self.max_message_bytes,
            max_queued_frames=MAX_QUEUED_FRAMES,
            tls=self.ssl_context,
            observer=self.options.on_frame,
            http_routes=self.routes,
        )
        self._live.add(session)
        try:
            await session.run(self._admit, self._on_payload, self._on_open)
        except Exception as exc:
            if isinstance(exc, BaseExceptionGroup) and exc.split(LocalProtocolError)[1] is None:
                # trio-websocket answers a ping that arrives after our Close with a Pong,
                # which wsproto refuses: the session was ending anyway.
                logger.debug("%r: the peer pinged during our closing handshake", session)
            else:
                # One session's failure is that session's end, never the server's.
                logger.exception("%r failed", session)
        finally:
            self._live.discard(session)
            if self.options.on_session is not None and session.index >= 0:
                self.options.on_session(session, "closed")
            self._notify()


@takes_options(ConnectorOptions)
def open_connector(options: ConnectorOptions) -> AbstractAsyncContextManager[ReferenceConnector]:
    """Run a reference connector listening on ``host:port`` for the block's duration.

    The keywords are the fields of [`ConnectorOptions`][trio_relay.testing.ConnectorOptions]:
    ``secrets`` (gateway id
    -> secret) turns on upgrade authentication, checked against ``clock()`` (unix
    seconds); ``descriptors`` overrides descriptor keys per platform;
    ``outbound_handler`` answers valid ``outbound`` frames instead of the built-in
    answers; ``ssl_context`` serves TLS (the URL becomes ``https://``); ``validate=False``
    skips the op-table and tenant checks; ``host`` and ``port`` (0: a free one) say
    where it listens; ``clock`` is the upgrade check's clock; ``max_message_bytes`` is
    the largest message it accepts; ``record=False`` keeps counts only; ``on_frame`` and
    ``on_session`` see every frame and session. Leaving the block closes every session with
    1001 (bounded) and stops listening. An exception raised in the block, a
    ``KeyboardInterrupt`` included, comes out as itself, never in an exception group.
    """
    return _run(options)


@asynccontextmanager
async def _run(options: ConnectorOptions) -> AsyncIterator[ReferenceConnector]:
    error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            connector = ReferenceConnector(nursery, options)
            try:
                await connector.start()
                yield connector
            except (trio.Cancelled, GeneratorExit):
                raise  # a cancel scope outside catches it; a closed generator must end
            except BaseException as exc:
                # Re-raised below, outside the nursery, so that the caller sees its own
                # exception (or the bind error) rather than an ExceptionGroup around it.
                error = exc
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT):
                    await connector._shutdown(abort=False)
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # Ctrl-C may land in any task (a session's, the listener's), not only in the
        # block; it still leaves as the one KeyboardInterrupt it is.
        interrupt = _first_interrupt(group)
        if interrupt is None:
            raise
        raise interrupt from None
    if error is not None:
        raise error


def _first_interrupt(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    for leaf in group.exceptions:
        if isinstance(leaf, BaseExceptionGroup):
            found = _first_interrupt(leaf)
            if found is not None:
                return found
        elif isinstance(leaf, (KeyboardInterrupt, SystemExit)):
            return leaf
    return None


@dataclass(frozen=True, kw_only=True)
class ServeOptions(ConnectorOptions):
    """[`ConnectorOptions`][trio_relay.testing.ConnectorOptions] plus trio's ``task_status`` for
    ``nursery.start``."""

    task_status: trio.TaskStatus[ReferenceConnector] = trio.TASK_STATUS_IGNORED


@takes_options(ServeOptions)
def serve_connector(options: ServeOptions) -> Coroutine[Any, Any, NoReturn]:
    """Serve until cancelled; ``await nursery.start(serve_connector, ...)`` returns the
    listening [`ReferenceConnector`][trio_relay.testing.ReferenceConnector] (``task_status``
    is trio's, which ``nursery.start`` passes). Takes the keywords of
    [`open_connector`][trio_relay.testing.open_connector], the fields of
    [`ConnectorOptions`][trio_relay.testing.ConnectorOptions].
    Prints nothing."""
    return _serve_forever(options)


async def _serve_forever(options: ServeOptions) -> NoReturn:
    async with _run(options) as connector:
        options.task_status.started(connector)
        await connector.serve_forever()
