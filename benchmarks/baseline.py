"""An asyncio relay client built the way the one trio_relay replaces was built.

The benchmarks compare trio_relay against this, so it is deliberately *faithful to the
old design*, not a good design:

- the ``websockets`` asyncio client, with websockets' own keepalive (ping every 30 s,
  pong deadline 60 s);
- every request does ``await ws.send(line)`` itself: one frame per WebSocket message,
  no writer task and no batching;
- a dict of ``asyncio.Future`` keyed by ``requestId``, resolved by a reader task, and
  each request waits with ``asyncio.wait_for(fut, timeout)``;
- a supervisor task that dials, handshakes, runs the reader and redials with backoff
  (1 → 30 s doubling, each wait uniform in [d/2, d], the ladder kept across flapping
  connections and reset after a connection lived 60 s);
- ``inbound_ack`` sent by the reader as soon as an ``inbound`` frame arrives.

It does carry the post-incident fixes, so that the comparison is against the best version
of the old design rather than a straw man: the reader fails every pending future when it
exits (those requests were written, so the outcome is *ambiguous*), and a request made
between connections fails at once instead of waiting on a dead socket.

Close codes are not classified: every close, 4401 included, is an ordinary drop followed
by backoff. There is no drain on exit: leaving the ``async with`` closes the socket with
1000 and cancels the supervisor; in-flight requests end ambiguous.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from trio_relay._core.token import mint_token
from trio_relay._core.url import normalize_url

__all__ = ["BaselineConfig", "BaselineOutcome", "BaselineRelay"]

log = logging.getLogger(__name__)


def _default_identities() -> list[tuple[str, str]]:
    return [("relay", "")]


@dataclass
class BaselineConfig:
    """Timings and identity of the baseline; the defaults are the replaced design's."""

    ping_interval: float = 30.0
    ping_timeout: float = 60.0
    request_timeout: float = 30.0
    handshake_timeout: float = 30.0
    #: websockets' own default: after a pong timeout (or any close) the closing
    #: handshake may take this long before the reader sees the connection end.
    close_timeout: float = 10.0
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    backoff_reset_after: float = 60.0
    gateway_id: str | None = None
    secret: str | None = None
    token_ttl: float = 300.0
    #: (platform, botId) pairs; one ``hello`` each, in this order.
    identities: list[tuple[str, str]] = field(default_factory=_default_identities)


@dataclass
class BaselineOutcome:
    """How one request ended (same meaning as trio_relay's ``Outcome``)."""

    success: bool
    ambiguous: bool
    error: str | None
    result: dict[str, Any]


# What the reader puts in a request's future: the result object, or None when the
# connection ended before an answer arrived.
_Reply = dict[str, Any] | None


class _LineBuffer:
    """Split newline-delimited JSON across WebSocket messages, keeping a partial line."""

    def __init__(self) -> None:
        self._partial = ""

    def feed(self, message: str | bytes) -> list[dict[str, Any]]:
        if isinstance(message, bytes):
            message = message.decode("utf-8", errors="replace")
        *lines, self._partial = (self._partial + message).split("\n")
        frames: list[dict[str, Any]] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                frame = json.loads(line)
            except ValueError:
                log.warning("skipping a line that is not JSON (%d chars)", len(line))
                continue
            if not isinstance(frame, dict):
                log.warning("skipping a JSON line that is not an object")
                continue
            frames.append(frame)
        return frames


def _line(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":")) + "\n"


class BaselineRelay:
    """The asyncio baseline. Use as ``async with BaselineRelay(url) as relay: ...``."""

    def __init__(
        self,
        url: str,
        config: BaselineConfig | None = None,
        rng: random.Random | None = None,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        """``trace``: told ``"seen"`` when the reader sees its connection end, ``"dial"``
        as a dial starts, ``"dialled"`` when websockets' ``connect`` returns (TCP and
        upgrade done), ``"connected"`` with the last descriptor (redial_steps.py's
        timeline; None, the default, costs one test per step)."""
        self.url = normalize_url(url)
        self._trace = trace
        self.config = config if config is not None else BaselineConfig()
        self._rng = rng if rng is not None else random.Random()
        #: dials: connection attempts; connects: handshakes completed; drops: handshaken
        #: connections that ended while we were not closing; dial_failures: attempts that
        #: never completed a handshake.
        self.stats: dict[str, int] = {"dials": 0, "connects": 0, "drops": 0, "dial_failures": 0}
        self.last_close_code: int | None = None
        self.last_close_reason: str | None = None
        self._pending: dict[str, asyncio.Future[_Reply]] = {}
        self._ws: ClientConnection | None = None
        self._connected = False
        self._connected_event = asyncio.Event()
        self._closing = False
        self._entered = False
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        """True from a completed handshake until that connection ends."""
        return self._connected

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> BaselineRelay:
        if self._entered:
            raise RuntimeError("BaselineRelay can be entered only once")
        self._entered = True
        self._supervisor = asyncio.create_task(self._supervise(), name="baseline-supervisor")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        self._set_connected(False)
        ws = self._ws
        if ws is not None:
            # Closing with 1000 ends the reader, which fails the pending futures.
            with contextlib.suppress(Exception):
                await ws.close(1000)
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        self._fail_pending()

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until a handshake has completed; ``TimeoutError`` after ``timeout``."""
        if self._closing:
            raise RuntimeError("the relay is closed")
        try:
            await asyncio.wait_for(self._connected_event.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"not connected within {timeout} s") from None

    # -- requests --------------------------------------------------------------------

    async def request(
        self, action: dict[str, Any], *, timeout: float | None = None
    ) -> BaselineOutcome:
        """Send one ``outbound`` and wait for its ``outbound_result``."""
        if self._closing:
            return BaselineOutcome(False, False, "client closed", {})
        ws = self._ws
        if ws is None or not self._connected:
            return BaselineOutcome(False, False, "not connected", {})
        request_id = uuid.uuid4().hex
        fut: asyncio.Future[_Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            try:
                await ws.send(
                    _line({"type": "outbound", "requestId": request_id, "action": action})
                )
            except Exception as e:
                # websockets raises before handing anything to the transport.
                return BaselineOutcome(False, False, f"write failed: {e!r}", {})
            wait = self.config.request_timeout if timeout is None else timeout
            try:
                reply = await asyncio.wait_for(fut, wait)
            except TimeoutError:
                return BaselineOutcome(False, True, "timeout", {})
            if reply is None:
                return BaselineOutcome(False, True, "connection lost", {})
            error = reply.get("error")
            return BaselineOutcome(
                bool(reply.get("success")),
                False,
                error if isinstance(error, str) else None,
                reply,
            )
        finally:
            self._pending.pop(request_id, None)

    # -- the supervisor --------------------------------------------------------------

    async def _supervise(self) -> None:
        cfg = self.config
        delay = cfg.backoff_initial
        loop = asyncio.get_running_loop()
        while not self._closing:
            # How long the last connection was up; None when it never got a handshake
            # (a failed dial is not a connection that lived, whatever reset_after is).
            lived: float | None = None
            self.stats["dials"] += 1
            ws = await self._dial()
            if ws is not None:
                buffer = _LineBuffer()
                try:
                    try:
                        await asyncio.wait_for(self._handshake(ws, buffer), cfg.handshake_timeout)
                    except Exception as e:
                        log.info("handshake failed: %r", e)
                        self.stats["dial_failures"] += 1
                    else:
                        self.stats["connects"] += 1
                        started = loop.time()
                        self._set_connected(True)
                        # The reader owns the connection from here; it fails the
                        # pending futures whichever way it exits.
                        await self._reader(ws, buffer)
                        lived = loop.time() - started
                        if not self._closing:
                            self.stats["drops"] += 1
                finally:
                    self._set_connected(False)
                    self._ws = None
                    self.last_close_code = ws.close_code
                    self.last_close_reason = ws.close_reason
                    with contextlib.suppress(Exception):
                        await ws.close()
            else:
                self.stats["dial_failures"] += 1
            if self._closing:
                break
            if lived is not None and lived >= cfg.backoff_reset_after:
                delay = cfg.backoff_initial
            wait = self._rng.uniform(delay / 2, delay) if delay > 0 else 0.0
            delay = min(delay * 2, cfg.backoff_max)
            log.debug("redialling in %.3f s", wait)
            await asyncio.sleep(wait)

    async def _dial(self) -> ClientConnection | None:
        cfg = self.config
        headers: dict[str, str] | None = None
        if cfg.gateway_id is not None and cfg.secret is not None:
            token = mint_token(cfg.gateway_id, cfg.secret, ttl=cfg.token_ttl, now=time.time())
            headers = {"Authorization": f"Bearer {token}"}
        if self._trace is not None:
            self._trace("dial")
        try:
            ws = await connect(
                self.url,
                additional_headers=headers,
                proxy=None,
                open_timeout=cfg.handshake_timeout,
                ping_interval=cfg.ping_interval,
                ping_timeout=cfg.ping_timeout,
                close_timeout=cfg.close_timeout,
            )
        except Exception as e:
            log.info("dial failed: %r", e)
            return None
        if self._trace is not None:
            self._trace("dialled")
        self._ws = ws
        return ws

    async def _handshake(self, ws: ClientConnection, buffer: _LineBuffer) -> None:
        identities = self.config.identities
        for platform, bot_id in identities:
            await ws.send(_line({"type": "hello", "platform": platform, "botId": bot_id}))
        descriptors = 0
        while descriptors < len(identities):
            for frame in buffer.feed(await ws.recv()):
                if frame.get("type") == "descriptor":
                    descriptors += 1
                else:
                    await self._handle_frame(ws, frame)

    async def _reader(self, ws: ClientConnection, buffer: _LineBuffer) -> None:
        try:
            while True:
                try:
                    message = await ws.recv()
                except ConnectionClosed:
                    return
                for frame in buffer.feed(message):
                    await self._handle_frame(ws, frame)
        finally:
            if self._trace is not None:
                self._trace("seen")
            # The post-incident fix: nothing is left waiting on a dead socket.
            self._set_connected(False)
            self._fail_pending()

    async def _handle_frame(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "outbound_result":
            fut = self._pending.pop(str(frame.get("requestId")), None)
            if fut is not None and not fut.done():
                result = frame.get("result")
                fut.set_result(result if isinstance(result, dict) else {})
        elif kind in ("inbound", "passthrough_forward"):
            buffer_id = frame.get("bufferId")
            if buffer_id is not None:
                # The replaced design acked on receipt, before any handoff.
                with contextlib.suppress(ConnectionClosed):
                    await ws.send(_line({"type": "inbound_ack", "bufferId": buffer_id}))
        elif kind in ("descriptor", "interrupt_inbound", "going_idle_ack"):
            pass
        else:
            log.warning("skipping a frame of unknown type %r", kind)

    # -- helpers ---------------------------------------------------------------------

    def _set_connected(self, value: bool) -> None:
        self._connected = value
        if value:
            if self._trace is not None:
                self._trace("connected")
            self._connected_event.set()
        else:
            self._connected_event.clear()

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_result(None)
