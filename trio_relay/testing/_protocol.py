"""The connector side of the relay protocol: what each gateway frame means, and what
the reference connector records about it.

:class:`ConnectorProtocol` is the half of the reference connector that sockets never
touch: it admits upgrades (through :class:`~._faults.UpgradePolicy`), answers ``hello``
with descriptors and replays the durable buffer, answers ``outbound`` (through
:class:`~._faults.ResultPolicy`), takes acks, and records everything so tests can wait
on it. Dispatch is synchronous and runs on the session's reader: only user-supplied
outbound handlers get a task of their own, so a slow handler never stalls the reader.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from trio_websocket import WebSocketRequest

from .._core.codec import RejectedFrame
from .._core.frames import (
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)
from ._buffer import DurableBuffer
from ._faults import ResultPolicy, UpgradePolicy
from ._session import ANONYMOUS, Admission, Session

logger = logging.getLogger("trio_relay.testing.connector")

JsonObject = dict[str, Any]
OutboundHandler = Callable[[Session, Outbound], Awaitable["JsonObject | None"]]
"""``async (session, frame) -> result``; a ``None`` result sends no reply at all."""


def default_descriptor(platform: str) -> JsonObject:
    return {
        "contract_version": 1,
        "platform": platform,
        "label": platform.title(),
        "max_message_length": 4096,
        "supports_draft_streaming": False,
        "supports_edit": True,
        "supports_threads": False,
        "markdown_dialect": "plain",
        "len_unit": "chars",
    }


class ConnectorProtocol:
    """Protocol state and records of the reference connector (see ReferenceConnector).

    Records (``received``, ``outbound``, ``acks``, ``rejected``) are plain lists in
    arrival order across all sessions; with ``record=False`` only ``outbound_count`` and
    the short lists (acks, rejected) are kept, for benchmarks that push millions of
    frames.
    """

    def __init__(
        self,
        *,
        secrets: dict[str, str] | None,
        descriptors: dict[str, JsonObject] | None,
        outbound_handler: OutboundHandler | None,
        clock: Callable[[], float],
        record: bool,
    ) -> None:
        self.descriptors: dict[str, JsonObject] = dict(descriptors or {})
        """platform -> descriptor keys overriding the defaults; may be changed live."""
        self.outbound_handler = outbound_handler
        self.record = record
        self.sessions: list[Session] = []
        """Every accepted upgrade, in order (including those refused right after)."""
        self.received: list[Frame] = []
        self.outbound: list[Outbound] = []
        self.acks: list[str] = []
        self.rejected: list[RejectedFrame] = []
        self.outbound_count = 0
        self.upgrades = UpgradePolicy(secrets, clock)
        self.results = ResultPolicy()
        self.buffer = DurableBuffer()
        self._handshaken: list[Session] = []
        self._changed = trio.lowlevel.ParkingLot()
        self._dispatch: dict[type[Frame], Callable[[Session, Any], None]] = {
            Hello: self._on_hello,
            Outbound: self._on_outbound,
            InboundAck: self._on_ack,
            GoingIdle: self._on_going_idle,
            Interrupt: self._on_interrupt,
        }

    @property
    def handshakes(self) -> int:
        """Sessions that got at least one descriptor."""
        return len(self._handshaken)

    def pending(self, gateway_id: str = ANONYMOUS) -> list[str]:
        """The bufferIds of ``gateway_id`` not acknowledged yet, oldest first."""
        return self.buffer.ids(gateway_id)

    # --- waiting ----------------------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds; it is re-checked after every change the
        connector records (a frame, a session opening or ending)."""
        while not predicate():
            await self._changed.park()

    async def wait_session(self, count: int = 1) -> Session:
        """Wait until ``count`` sessions completed a handshake; return the count-th."""
        await self.wait_until(lambda: len(self._handshaken) >= count)
        return self._handshaken[count - 1]

    async def wait_outbound(self, count: int) -> None:
        await self.wait_until(lambda: self.outbound_count >= count)

    async def wait_acks(self, count: int) -> None:
        await self.wait_until(lambda: len(self.acks) >= count)

    def _notify(self) -> None:
        self._changed.unpark_all()

    # --- durable deliveries -----------------------------------------------------------

    def buffer_inbound(self, event: JsonObject, *, gateway_id: str = ANONYMOUS) -> str:
        """Buffer a user message for ``gateway_id``; returns its bufferId. It is sent at
        once to that gateway's session (unless it went idle) and replayed on every
        handshake until acknowledged."""
        frame = self.buffer.add(gateway_id, lambda bid: InboundFrame(event, bid))
        self._deliver_now(gateway_id, frame)
        assert isinstance(frame, InboundFrame) and frame.buffer_id is not None
        return frame.buffer_id

    def buffer_passthrough(self, forward: JsonObject, *, gateway_id: str = ANONYMOUS) -> str:
        """Like :meth:`buffer_inbound`, for a ``passthrough_forward``."""
        frame = self.buffer.add(gateway_id, lambda bid: PassthroughFrame(forward, bid))
        self._deliver_now(gateway_id, frame)
        assert isinstance(frame, PassthroughFrame) and frame.buffer_id is not None
        return frame.buffer_id

    def _deliver_now(self, gateway_id: str, frame: Frame) -> None:
        # Only to a handshaken session: one still handshaking gets it from the replay,
        # and sending it here too would deliver it twice on the same connection.
        for session in reversed(self._handshaken):
            if session.gateway_id == gateway_id and session.is_open:
                if not session.idle:
                    session.send(frame)
                return

    # --- frames -----------------------------------------------------------------------

    def _admit(self, session: Session, request: WebSocketRequest) -> Admission:
        admission = self.upgrades.admit(request.path, request.headers)
        if admission.http_status is None:
            session.index = len(self.sessions)
            self.sessions.append(session)
        if admission.refuse is not None:
            logger.debug("refusing upgrade with %s", admission.refuse)
        return admission

    def _on_open(self, session: Session) -> None:
        logger.debug("%r open", session)
        self._notify()

    def _on_payload(self, session: Session, payload: str | bytes) -> None:
        for item in session.decoder.feed(payload):
            if isinstance(item, RejectedFrame):
                self.rejected.append(item)
                logger.warning("%r: rejected frame: %s (%r)", session, item.reason, item.sample)
                continue
            if self.record:
                self.received.append(item)
            self._dispatch[type(item)](session, item)
        self._notify()

    def _on_hello(self, session: Session, frame: Hello) -> None:
        session.hellos.append(frame)
        descriptor = default_descriptor(frame.platform)
        descriptor.update(self.descriptors.get(frame.platform, {}))
        session.send(DescriptorFrame(descriptor))
        if not session.handshaken:
            session.handshaken = True
            self._handshaken.append(session)
            # At-least-once: everything unacknowledged goes again on every handshake.
            for delivery in self.buffer.frames(session.gateway_id):
                session.send(delivery)

    def _on_outbound(self, session: Session, frame: Outbound) -> None:
        self.outbound_count += 1
        if self.record:
            self.outbound.append(frame)
        if self.outbound_handler is None:
            result = {"success": True, "message_id": f"m{self.outbound_count}"}
            self.results.route(session, OutboundResult(frame.request_id, result))
        else:
            session.start_soon(self._run_handler, self.outbound_handler, session, frame)

    async def _run_handler(
        self, handler: OutboundHandler, session: Session, frame: Outbound
    ) -> None:
        try:
            result = await handler(session, frame)
        except Exception as exc:
            # A connector whose backend failed still answers: with a failure.
            logger.exception("outbound handler failed for %s", frame.request_id)
            result = {"success": False, "error": f"connector handler failed: {exc!r}"}
        if result is not None:
            self.results.route(session, OutboundResult(frame.request_id, result))

    def _on_ack(self, session: Session, frame: InboundAck) -> None:
        self.acks.append(frame.buffer_id)
        self.buffer.ack(session.gateway_id, frame.buffer_id)

    def _on_going_idle(self, session: Session, frame: GoingIdle) -> None:
        session.idle = True
        session.send(GoingIdleAck())

    def _on_interrupt(self, session: Session, frame: Interrupt) -> None:
        pass  # fire-and-forget; ``received`` has it
