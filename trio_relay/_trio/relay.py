"""The relay client: ``open_relay`` and the :class:`Relay` handle it yields.

One nursery owns the client's whole life::

    open_relay()                    relay nursery
     ├── supervisor                 dial → handshake → serve → classify → back off → dial
     │    └── connection nursery    reader, writer, pinger (see _connection.py)
     └── inbound pipeline           handlers, never on the reader (see _inbound.py)

Leaving the ``async with`` block stops new requests, drains in-flight ones for at most
``drain_timeout``, closes the socket with 1000 and cancels the rest, so no task outlives
the block.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._core import outcome as _outcome
from .._core.backoff import Backoff
from .._core.close import NORMAL_CLOSE_CODE, Verdict, classify
from .._core.codec import encode_frame, encode_line
from .._core.config import Identity, RelayConfig, UpgradeAuth
from .._core.descriptor import Descriptor
from .._core.errors import RelayClosed, RelayRevoked
from .._core.frames import FrameError, Interrupt
from .._core.media import ConnectorRoutes
from .._core.outcome import Outcome
from .._core.policy import RelevancePolicy
from .._core.state import State
from .._core.stats import RelayStats
from .._core.token import mint_token
from .._core.url import normalize_url
from .acks import TrackedAck
from .connection import Connection
from .connector_http import ConnectorHttp
from .dial import Endpoint
from .inbound import (
    DeadLetterHandler,
    InboundPipeline,
    InterruptHandler,
    MessageHandler,
    PassthroughHandler,
)
from .media import RelayMedia, with_media_downloads
from .policy import declare_policy
from .serve import ConnectionHooks, serve_connection

logger = logging.getLogger("trio_relay")


class Relay:
    """A handle on one relay; get it from :func:`open_relay`.

    ``state``, ``descriptors`` and ``stats`` are live views. ``request`` is safe to
    call from any task, including inbound handlers.
    """

    media: RelayMedia
    """Media upload and download over the connector's HTTP routes (``upload()`` returns
    the ``source_url`` of a ``send_media`` action)."""

    def __init__(
        self,
        url: str,
        *,
        identities: Sequence[Identity],
        auth: UpgradeAuth | None,
        config: RelayConfig,
        pipeline: InboundPipeline,
        stats: RelayStats,
    ) -> None:
        self._endpoint = Endpoint.from_url(normalize_url(url))
        self.url = str(self._endpoint) + self._endpoint.resource.split("?")[0]
        """The URL dialled, without user info or query (either may hold a secret)."""
        if not (self._endpoint.secure or self._endpoint.is_loopback or config.allow_insecure):
            raise ValueError(
                f"refusing plaintext ws:// to {self._endpoint.host!r}: the upgrade token "
                "would travel in the clear. Use https:// or wss://, or set "
                "RelayConfig(allow_insecure=True) if the network is trusted"
            )
        if not identities:
            raise ValueError("identities must name at least one Identity")
        self._identities = list(identities)
        self._bot_ids = {identity.platform: identity.bot_id for identity in identities}
        self._auth = auth
        self._config = config
        self._pipeline = pipeline
        self._last_ack: TrackedAck | None = None
        self.stats = stats
        self._state = State.CONNECTING
        self._state_changed = trio.Event()
        self._conn: Connection | None = None
        """The connection requests go to: open, handshake done."""
        self._newest: Connection | None = None
        """The newest open connection, handshake done or not (acks may use it)."""
        self._closing = False
        self.descriptors: dict[str, Descriptor] = {}
        self.default_platform: str | None = None
        self._id_prefix = secrets.token_hex(4)
        self._ids = itertools.count()
        self._backoff = Backoff(
            initial=config.backoff_initial,
            maximum=config.backoff_max,
            first_delay=config.backoff_first_delay,
            reset_after=config.backoff_reset_after,
        )
        self._dormant_requested = False

    def __repr__(self) -> str:
        return f"<Relay {self._endpoint} state={self._state.value}>"

    # --- state -----------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    def _set_state(self, state: State, cause: str) -> None:
        if state is self._state:
            return
        logger.info(
            "relay %s: %s -> %s (%s)", self._endpoint, self._state.value, state.value, cause
        )
        self._state = state
        self._state_changed.set()
        self._state_changed = trio.Event()

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until a connection is up (handshake done).

        Raises ``TimeoutError`` after ``timeout`` seconds, :class:`RelayRevoked` if the
        connector revoked us, :class:`RelayClosed` once the relay is closed.
        """
        with trio.move_on_after(timeout if timeout is not None else float("inf")):
            while self._state is not State.CONNECTED:
                self._raise_if_terminal()
                await self._state_changed.wait()
            return
        self._raise_if_terminal()
        raise TimeoutError(
            f"relay not connected within {timeout:g} s (state {self._state.value}, last close "
            f"code {self.stats.last_close_code}); check the URL and that the connector is up"
        )

    def _raise_if_terminal(self) -> None:
        if self._state is State.REVOKED:
            raise RelayRevoked(
                "the connector revoked this gateway's credentials; issue new ones and open "
                "a new relay"
            )
        if self._state is State.CLOSED:
            raise RelayClosed("the relay is closed; open a new one")

    # --- requests --------------------------------------------------------------------

    async def request(
        self,
        action: Mapping[str, Any],
        *,
        platform: str | None = None,
        timeout: float | None = None,
        wait_connected: bool = False,
    ) -> Outcome:
        """Send ``action`` to the connector and return how it ended.

        Every failure the network can cause is an :class:`Outcome` (see its
        ``ambiguous`` flag before retrying). Raises only for cancellation and for the
        caller's own mistakes: an action that is not an object with a string ``op``, is
        not JSON-serialisable, is larger than ``max_message_bytes``, or names a platform
        this relay has no identity for.

        ``timeout`` defaults to ``config.request_timeout``. Between connections the
        request fails at once, unless ``wait_connected`` is true: then it waits for the
        next connection within the same timeout.
        """
        request_id, line, op = self._encode_request(action, platform)
        timeout = self._config.request_timeout if timeout is None else timeout
        if not timeout > 0:  # NaN fails this too
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        deadline = trio.current_time() + timeout
        outcome = await self._deliver(
            request_id, line, op, platform, deadline, timeout, wait_connected
        )
        self.stats.requests[_outcome_label(outcome)] += 1
        return outcome

    def _encode_request(
        self, action: Mapping[str, Any], platform: str | None
    ) -> tuple[str, str, str]:
        if not isinstance(action, Mapping) or not isinstance(action.get("op"), str):
            raise TypeError("action must be a mapping with a string 'op', e.g. {'op': 'send', ...}")
        if platform is not None and platform not in self._bot_ids:
            raise ValueError(
                f"no identity for platform {platform!r}; configured: {sorted(self._bot_ids)}"
            )
        request_id = f"{self._id_prefix}{next(self._ids):08x}"
        frame: dict[str, Any] = {"type": "outbound", "requestId": request_id, "action": action}
        if platform is not None:
            frame["platform"] = platform
            if self._bot_ids[platform]:
                frame["botId"] = self._bot_ids[platform]
        try:
            line = encode_line(frame)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"action is not JSON-serialisable: {exc}") from None
        size = len(line.encode("utf-8"))
        if size > self._config.max_message_bytes:
            raise ValueError(
                f"action encodes to {size} bytes, over max_message_bytes "
                f"({self._config.max_message_bytes}); split it or raise the limit"
            )
        return request_id, line, str(action["op"])

    async def _deliver(
        self,
        request_id: str,
        line: str,
        op: str,
        platform: str | None,
        deadline: float,
        timeout: float,
        wait_connected: bool,
    ) -> Outcome:
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        conn = self._conn
        if conn is None and wait_connected:
            with trio.move_on_at(deadline):
                while self._conn is None and self._refusal() is None:
                    await self._state_changed.wait()
            refusal = self._refusal()
            if refusal is not None:
                return refusal
            conn = self._conn
            if conn is None:
                return _outcome.timed_out(timeout, written=False)
        if conn is None:
            return _outcome.not_connected(self._state.value)
        descriptor = self.descriptors.get(platform or self.default_platform or "")
        if descriptor is not None and not descriptor.supports(op):
            return _outcome.unsupported_op(op, descriptor.platform)
        return await conn.request(request_id, line, deadline, timeout)

    def _refusal(self) -> Outcome | None:
        """The outcome for a request the relay will not even try to send, if any."""
        if self._closing:
            return _outcome.closing()
        if self._state is State.REVOKED:
            return _outcome.revoked()
        return None

    async def ping(self, timeout: float | None = None) -> float:
        """Round-trip a WebSocket ping now; returns the RTT in seconds.

        Raises ``ConnectionError`` when there is no connection (or it drops meanwhile)
        and ``TimeoutError`` when no pong arrives within ``timeout`` (default:
        ``config.ping_timeout``).
        """
        conn = self._conn
        if conn is None:
            raise ConnectionError(f"relay not connected (state {self._state.value})")
        limit = self._config.ping_timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            rtt = await conn.ping()
            if rtt is None:
                raise ConnectionError("the connection ended before the pong")
            return rtt
        raise TimeoutError(f"no pong within {limit:g} s")

    def interrupt(self, session_key: str, reason: str | None = None) -> bool:
        """Tell the connector to stop a session (fire and forget). False when there is
        no connection to send it on."""
        conn = self._conn
        return conn is not None and conn.send_line(encode_frame(Interrupt(session_key, reason)))

    async def go_idle(self, timeout: float = 5.0) -> bool:
        """Ask the connector to switch us to buffered-only delivery; true once acked."""
        conn = self._conn
        if conn is None:
            return False
        if await conn.go_idle(timeout):
            return True
        if conn.is_open:
            logger.warning(
                "relay %s: no going_idle_ack within %g s; keeping the connection",
                self._endpoint,
                timeout,
            )
        return False

    async def go_dormant(self, timeout: float = 5.0) -> bool:
        """Go idle, then close the socket on purpose; the redial stays armed and fires
        after ``config.dormant_redial_delay``. If the connector does not acknowledge
        within ``timeout``, the connection is kept and false is returned."""
        conn = self._conn
        if conn is None or not await self.go_idle(timeout) or not conn.is_open:
            return False
        self._dormant_requested = True
        await conn.close(NORMAL_CLOSE_CODE, "dormant", "went dormant", by_us=True)
        return True

    # --- inbound plumbing ------------------------------------------------------------

    def _send_ack(self, buffer_id: str) -> bool:
        # The newest open socket, handshake done or not: the connector replays buffered
        # deliveries right after its descriptor, before we count ourselves connected.
        conn = self._newest
        ack = TrackedAck(buffer_id)
        if conn is None or not (conn.is_open and conn.outbox.put(ack)):
            return False
        self._last_ack = ack
        self.stats.acks_sent += 1
        return True

    # --- supervisor ------------------------------------------------------------------

    async def _supervise(self) -> None:
        fresh_token_redial = False
        hooks = ConnectionHooks(
            on_open=self._connection_opened,
            on_up=self._connection_up,
            on_end=self._connection_ended,
            on_inbound=self._pipeline.submit,
        )
        while not self._closing:
            end = await serve_connection(
                endpoint=self._endpoint,
                config=self._config,
                stats=self.stats,
                identities=self._identities,
                mint_token=self._mint,
                hooks=hooks,
            )
            if end.up_for is not None:
                self._backoff.connection_ended(end.up_for)
            if self._closing:
                return
            # Only our own close of this connection is the dormant one: a drop that beat
            # go_dormant's close to it is an ordinary drop.
            dormant, self._dormant_requested = self._dormant_requested and end.by_us, False
            if dormant:
                # A deliberate close: not a failure, so the ladder starts afresh.
                fresh_token_redial = False
                self._backoff.reset()
                await trio.sleep(self._config.dormant_redial_delay)
                continue
            # Whether this connection was the one redial after a first 4401 strike is
            # the supervisor's knowledge; the close rules need it with the end.
            verdict = classify(end, fresh_token_redial=fresh_token_redial)
            fresh_token_redial = verdict is Verdict.FRESH_TOKEN_REDIAL
            if verdict is Verdict.REVOKED:
                self._set_state(State.REVOKED, f"connector refused a fresh token ({end.reason})")
                return
            if fresh_token_redial:
                delay = 0.0
                self._set_state(
                    State.RECONNECTING, "4401 after handshake; one redial with a fresh token"
                )
            else:
                delay = self._backoff.next_delay()
                if self._state is not State.CONNECTING:
                    self._set_state(State.RECONNECTING, f"redial in {delay:.3g} s")
            await trio.sleep(delay)

    def _mint(self) -> str | None:
        # A fresh token for every dial: one minted before a long suspend would be stale.
        auth = self._auth
        if auth is None:
            return None
        return mint_token(auth.gateway_id, auth.secret, ttl=auth.token_ttl, now=time.time())

    def _connection_opened(self, conn: Connection) -> None:
        self._newest = conn

    def _connection_up(self, conn: Connection) -> None:
        descriptors: dict[str, Descriptor] = {}
        for frame in conn.descriptors:
            try:
                descriptor = Descriptor.from_wire(frame.descriptor)
            except FrameError as exc:
                self.stats.frames_rejected += 1
                logger.warning("skipped a bad descriptor from the connector: %s", exc)
                continue
            descriptors.setdefault(descriptor.platform, descriptor)
        self.descriptors = descriptors
        self.default_platform = next(iter(descriptors), None)
        self.stats.connects += 1
        self._conn = conn
        self._set_state(State.CONNECTED, f"handshake done, platforms {sorted(descriptors)}")

    def _connection_ended(self, conn: Connection) -> None:
        # Called synchronously by whichever task saw the end, so that requests made
        # from now on fail at once instead of queueing on a dead socket.
        info = conn.end_info
        assert info is not None
        if not info.by_us:
            self.stats.drops[info.cause.split(":")[0]] += 1
        self.stats.last_close_code = info.code
        self.stats.last_close_reason = info.reason
        if self._newest is conn:
            self._newest = None
        if self._conn is conn:
            self._conn = None
            if self._dormant_requested and info.by_us:
                self._set_state(State.DORMANT, "went dormant; redial armed")
            elif not self._closing:
                self._set_state(State.RECONNECTING, info.cause)

    # --- shutdown --------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self._closing = True
        conn = self._conn or self._newest  # one still in its handshake is closed too
        # Requests and running handlers share one drain bound; a handler's ack needs
        # the socket, so the drain comes before the close.
        with trio.move_on_after(self._config.drain_timeout):
            async with trio.open_nursery() as drains:
                drains.start_soon(self._pipeline.drain)
                if conn is not None:
                    drains.start_soon(conn.wait_drained)
        if conn is not None:
            last_ack = self._last_ack
            if last_ack is not None and conn.is_open:
                # Acks of handlers that finished in the drain leave before the close.
                with trio.move_on_after(self._config.close_timeout):
                    await last_ack.written.wait()
            await conn.close(NORMAL_CLOSE_CODE, "gateway closing", "closed by us", by_us=True)
        self._set_state(State.CLOSED, "relay closed")


def _outcome_label(outcome: Outcome) -> str:
    if outcome.success:
        return "success"
    if outcome.code in _outcome.GATEWAY_CODES:
        return outcome.code
    return "failed"  # the connector answered with a refusal


@asynccontextmanager
async def open_relay(
    url: str,
    *,
    identities: Sequence[Identity] | None = None,
    auth: UpgradeAuth | None = None,
    on_message: MessageHandler | None = None,
    on_interrupt: InterruptHandler | None = None,
    on_passthrough: PassthroughHandler | None = None,
    on_dead_letter: DeadLetterHandler | None = None,
    config: RelayConfig | None = None,
    policy: RelevancePolicy | None = None,
) -> AsyncIterator[Relay]:
    """Open a relay to the connector at ``url`` for the duration of the block.

    Returns at once; the first dial happens in the background (``await
    relay.wait_connected()`` to wait for it). Leaving the block drains in-flight
    requests for at most ``config.drain_timeout`` seconds, closes the socket with 1000 and
    cancels everything else: no task outlives it. An exception raised in the block comes
    out as itself, not wrapped in an exception group.

    ``policy`` (a :class:`RelevancePolicy`) is declared to the connector once, after
    the first handshake (``POST /relay/policy``); a failure is logged as a warning and
    the relay runs on; an all-default policy is not sent.
    """
    config = config or RelayConfig()
    stats = RelayStats()
    relay: Relay | None = None

    def send_ack(buffer_id: str) -> bool:
        return relay is not None and relay._send_ack(buffer_id)

    # The connector's HTTP routes (media, policy), minting a fresh token per request.
    routes_http = ConnectorHttp(
        ConnectorRoutes.from_relay_url(url),
        lambda: relay._mint() if relay is not None else None,
        config,
    )
    media = RelayMedia(routes_http, config)
    if config.download_media and on_message is not None:
        on_message = with_media_downloads(on_message, media)

    pipeline = InboundPipeline(
        config=config,
        stats=stats,
        on_message=on_message,
        on_interrupt=on_interrupt,
        on_passthrough=on_passthrough,
        on_dead_letter=on_dead_letter,
        send_ack=send_ack,
        namespace=auth.gateway_id if auth is not None else "",
    )
    relay = Relay(
        url,
        identities=identities if identities is not None else [Identity("relay", "")],
        auth=auth,
        config=config,
        pipeline=pipeline,
        stats=stats,
    )
    relay.media = media
    try:
        async with trio.open_nursery() as nursery:
            # Our tasks are shielded from a cancellation of the caller's scope until
            # _shutdown is over: the drain and the closing handshake need the reader.
            shields = [trio.CancelScope(shield=True) for _ in range(2)]

            async def shielded(scope: trio.CancelScope, task: Callable[[], Awaitable[Any]]) -> None:
                with scope:
                    await task()

            nursery.start_soon(shielded, shields[0], pipeline.run)
            nursery.start_soon(shielded, shields[1], relay._supervise)
            if policy is not None:
                nursery.start_soon(declare_policy, relay, routes_http, policy)
            try:
                yield relay
            finally:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(config.drain_timeout + config.close_timeout + 1):
                        await relay._shutdown()
                    with trio.move_on_after(config.close_timeout):
                        await routes_http.aclose()
                for scope in shields:
                    scope.cancel()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # Our own tasks do not raise, so a group here wraps the block's exception (or
        # a bug of ours): hand it over as itself.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        if relay._state is not State.CLOSED:
            relay._set_state(State.CLOSED, "relay closed")
