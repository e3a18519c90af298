"""The connector side of the relay protocol: what each gateway frame means, and what
the reference connector records about it.

`ConnectorProtocol` is the half of the reference connector that sockets never
touch: it admits upgrades (through `UpgradePolicy`), answers ``hello``
with descriptors and replays the durable buffer, checks and answers ``outbound``
(through `._ops` and `ResultPolicy`), takes acks, and records
everything so tests can wait on it. Dispatch is synchronous and runs on the session's
reader: only user-supplied outbound handlers get a task of their own, so a slow handler
never stalls the reader.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio
from trio_websocket import WebSocketRequest

from .._core.codec import RejectedFrame
from .._core.descriptor import LEGACY_OPS, Descriptor
from .._core.frames import (
    DescriptorFrame,
    Frame,
    FrameError,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)
from .._core.idempotency import IDEMPOTENCY_KEY, check_key
from ._buffer import DurableBuffer
from ._chats import ChatBook, PromptShown, TranscriptEntry
from ._drafts import TOMBSTONES, DraftBook
from ._faults import ResultPolicy, UpgradePolicy
from ._idempotency import IdempotencyStore, KeyEntry
from ._ops import OP_TABLE, ActionRefusal, check_action, egress_declined
from ._options import ConnectorOptions, JsonObject, OutboundHandler
from ._session import ANONYMOUS, Admission, Session

logger = logging.getLogger("trio_relay.testing.connector")

ANY_PLATFORM = "*"
"""The ``descriptors`` key whose overrides apply to every platform."""

__all__ = [
    "ConnectorProtocol",
    "JsonObject",
    "OutboundHandler",
    "default_descriptor",
    "live_descriptor",
]


_TRUST_FIELDS = frozenset({"is_bot", "message_is_edit", "one_to_one_verified"})
"""Per-event source fields (docs/protocol.md, "Trust fields"): never templated."""


def _template(source: JsonObject) -> JsonObject:
    """A chat's latest source as the template of the next event: its trust fields left
    out (they describe that one event)."""
    return {k: v for k, v in source.items() if k not in _TRUST_FIELDS}


def default_descriptor(platform: str) -> JsonObject:
    """The required descriptor keys of wire protocol v1 for ``platform``: label
    ``platform.title()``, 4096 characters, edits on, plain markdown. It lists no
    ``supported_ops``, so it stands for a connector of the legacy set (send, edit,
    typing, follow_up), for tests that hand-make descriptor frames.

    Args:
        platform: The platform name (``"slack"``).

    Returns:
        A fresh dict each call, free to change.
    """
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


def live_descriptor(
    *,
    drafts: bool = True,
    stream_is_message: bool | None = None,
    block_formatting: bool = False,
    task_cards: bool = False,
    extra_ops: tuple[str, ...] = (),
) -> JsonObject:
    """Descriptor keys for the newer capabilities, to pass (per platform) as
    ``descriptors`` to [`open_connector`][trio_relay.testing.open_connector]: ``drafts`` advertises
    live cards
    (``supports_draft_streaming`` and the ``draft`` op), ``stream_is_message`` sets
    ``draft_stream_is_message`` (``None`` leaves it out: the platform name decides),
    ``block_formatting`` sets ``supports_block_formatting``, ``task_cards`` adds the
    ``task_card`` and ``task_card_stop`` ops. ``supported_ops`` always lists the
    legacy ops as well, plus ``extra_ops``."""
    ops = sorted(LEGACY_OPS) + list(extra_ops)
    if drafts:
        ops.append("draft")
    if task_cards:
        ops += ["task_card", "task_card_stop"]
    keys: JsonObject = {
        "supports_draft_streaming": drafts,
        "supports_block_formatting": block_formatting,
        "supported_ops": ops,
    }
    if stream_is_message is not None:
        keys["draft_stream_is_message"] = stream_is_message
    return keys


class ConnectorProtocol:
    """Protocol state and records of the reference connector (see ReferenceConnector).

    Records (``received``, ``outbound``, ``acks``, ``rejected``) are plain lists in
    arrival order across all sessions; with ``record=False`` only ``outbound_count`` and
    the short lists (acks, rejected) are kept, for benchmarks that push millions of
    frames.
    """

    def __init__(self, options: ConnectorOptions) -> None:
        self.options = options
        self.descriptors: dict[str, JsonObject] = dict(options.descriptors or {})
        """platform -> descriptor keys overriding the defaults (``"*"``: every platform's,
        under its own); may be changed live."""
        self.outbound_handler = options.outbound_handler
        """Answers valid ``outbound`` frames when set; may be changed live."""
        self.record = options.record
        """Whether frames, outbound and transcripts are kept (``ConnectorOptions.record``)."""
        self.sessions: list[Session] = []
        """Every accepted upgrade, in order (including those refused right after)."""
        self.received: list[Frame] = []
        """Every frame the gateway sent, decoded, in arrival order (empty with
        ``record=False``)."""
        self.outbound: list[Outbound] = []
        """Every valid [`Outbound`][trio_relay.testing.Outbound] request, in arrival order
        (empty with ``record=False``)."""
        self.acks: list[str] = []
        """The ``bufferId`` of every ``inbound_ack``, in arrival order: a delivery the
        gateway handled (``buffer_id in connector.acks``)."""
        self.rejected: list[RejectedFrame] = []
        """Every frame refused as malformed, with its reason and a sample."""
        self.outbound_count = 0
        """How many valid ``outbound`` frames arrived (kept with ``record=False`` too)."""
        self.upgrades = UpgradePolicy(options.secrets, options.clock, options.breaks)
        self.results = ResultPolicy(options.breaks)
        self.buffer = DurableBuffer()
        self.chats = ChatBook(keep_transcripts=options.record)
        self.drafts = DraftBook(0 if not options.breaks.seal_tombstones else TOMBSTONES)
        """Every live card (``draft`` stream) carried out, with its seal's tombstone."""
        self.refusals: dict[str, list[ActionRefusal]] = {}
        """op -> refusals the next valid actions of that op get instead of being
        carried out (see
        [`refuse_actions`][trio_relay.testing.ReferenceConnector.refuse_actions])."""
        self.keys: IdempotencyStore | None = (
            None
            if options.idempotency_window is None
            else IdempotencyStore(options.idempotency_window, options.idempotency_max_keys)
        )
        """The idempotency keys carried out (``idempotency_window`` set), else None."""
        self._injected = itertools.count(1)
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

    def latest_prompt(self, chat_id: str) -> PromptShown | None:
        """The prompt the gateway showed last in ``chat_id`` (a ``prompt`` op it carried
        out, from [`Relay.ask`][trio_relay.Relay.ask]), or ``None``: its
        ``prompt_id`` is what [`press`][trio_relay.testing.ReferenceConnector.press]
        takes.

        Args:
            chat_id: The chat the prompt was shown in.
        """
        return self.chats.latest_prompt(chat_id)

    def transcript(self, chat_id: str) -> list[TranscriptEntry]:
        """What happened in ``chat_id``, oldest first: the users' messages and presses
        the connector sent, and every op the gateway had carried out there. Each entry
        reads as one line (``str(entry)``); empty with ``record=False``."""
        return self.chats.transcript(chat_id)

    def transcript_text(self, chat_id: str) -> str:
        """[`transcript`][trio_relay.testing.ReferenceConnector.transcript] as text, one line an
        entry."""
        return "".join(f"{entry}\n" for entry in self.chats.transcript(chat_id))

    def refuse_actions(
        self,
        op: str,
        count: int = 1,
        *,
        code: str = "platform_error",
        error: str | None = None,
    ) -> None:
        """Refuse the next ``count`` valid actions of ``op`` with ``{success: false,
        code, error}``, as a platform that rejected them would (a definite refusal:
        nothing was carried out)."""
        if op not in OP_TABLE:
            raise ValueError(f"unknown op {op!r}; protocol v1 ops: {', '.join(OP_TABLE)}")
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        text = error or f"the platform refused this {op} (injected)"
        self.refusals.setdefault(op, []).extend([ActionRefusal(code, text)] * count)

    def decline_egress(self, chat_id: str, *, with_code: bool = True) -> None:
        """Decline every later reply to ``chat_id`` as the real connector declines a
        destination that is not approved for the connection: ``{success: false, code:
        "egress_declined", error: "<platform> egress declined: target is not an
        approved destination for this connection"}``. ``with_code=False`` sends the
        text alone, as older connectors do. Undo with
        [`allow_egress`][trio_relay.testing.ReferenceConnector.allow_egress]."""
        self.chats.decline(chat_id, with_code=with_code)

    def allow_egress(self, chat_id: str) -> None:
        """Undo [`decline_egress`][trio_relay.testing.ReferenceConnector.decline_egress]
        (a chat's own scope is still checked)."""
        self.chats.allow(chat_id)

    def auto_thread(self, chat_id: str, on: bool = True) -> None:
        """The connector's auto-thread policy for ``chat_id``: each later ``send`` to it
        opens a new thread, and its result carries that thread's ``thread_id`` (and an
        ``auto_thread_name``); the thread is a chat of the same tenant. ``on=False``
        ends it."""
        if on:
            self.chats.auto_threads.add(chat_id)
        else:
            self.chats.auto_threads.discard(chat_id)

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
        """Wait until ``count`` valid ``outbound`` frames arrived in all."""
        await self.wait_until(lambda: self.outbound_count >= count)

    async def wait_acks(self, count: int) -> None:
        """Wait until ``count`` acks arrived in all (see ``acks``)."""
        await self.wait_until(lambda: len(self.acks) >= count)

    def _notify(self) -> None:
        self._changed.unpark_all()

    # --- durable deliveries -----------------------------------------------------------

    def buffer_inbound(self, event: JsonObject, *, gateway_id: str = ANONYMOUS) -> str:
        """Buffer a user message for ``gateway_id``; returns its bufferId. It is sent at
        once to that gateway's session (unless it went idle) and replayed on every
        handshake until acknowledged."""
        self.chats.saw_inbound(event, gateway_id)
        frame = self.buffer.add(gateway_id, lambda bid: InboundFrame(event, bid))
        self._deliver_now(gateway_id, frame)
        assert isinstance(frame, InboundFrame) and frame.buffer_id is not None
        return frame.buffer_id

    def say(
        self,
        chat_id: str,
        text: str,
        *,
        user: str = "U1",
        user_name: str | None = None,
        platform: str | None = None,
        scope_id: str | None = None,
        gateway_id: str | None = None,
        is_bot: bool | None = None,
        message_is_edit: bool | None = None,
        one_to_one_verified: bool | None = None,
    ) -> str:
        """A user writes ``text`` in ``chat_id``: buffer the inbound event a platform
        would produce (a fresh ``message_id``, the chat's known platform, tenant and
        name); returns its bufferId. The platform defaults to the one the chat is known
        on, else the first one the gateway said hello for, else ``"relay"``.

        ``is_bot``, ``message_is_edit``, ``one_to_one_verified``: the source's trust
        fields, sent when given (``None``: left out, as an older connector does); they
        belong to this event only, never carried over from the chat's earlier ones."""
        chat = self.chats.chat(chat_id)
        gateway = gateway_id or chat.gateway_id or self._latest_gateway()
        source: JsonObject = {**_template(chat.source), "chat_id": chat_id, "user_id": user}
        trust = {
            "is_bot": is_bot,
            "message_is_edit": message_is_edit,
            "one_to_one_verified": one_to_one_verified,
        }
        source.update({k: v for k, v in trust.items() if v is not None})
        source["platform"] = platform or chat.platform or self._first_platform(gateway)
        source.setdefault("chat_type", "dm")
        source["user_name"] = user_name or user
        if scope_id is not None:
            source["scope_id"] = scope_id
        event: JsonObject = {
            "text": text,
            "message_type": "text",
            "message_id": f"u{next(self._injected)}",
            "source": source,
        }
        return self.buffer_inbound(event, gateway_id=gateway)

    def press(
        self, prompt_id: str, option_id: str, *, user: str = "U1", user_name: str | None = None
    ) -> str:
        """A user presses option ``option_id`` of the prompt ``prompt_id`` (one the
        gateway sent with the ``prompt`` op). Like a real connector, this produces an
        inbound ``prompt_response`` event whose text is ``/{option_id}`` (a command), for
        older gateways; it is buffered for the gateway that sent the prompt and fanned
        out live to that gateway's other sessions (its siblings must drop it). Returns
        the bufferId. Raises ``LookupError`` for a prompt never sent and ``ValueError``
        for an option it does not offer."""
        shown = self.chats.prompts.get(prompt_id)
        if shown is None:
            known = ", ".join(self.chats.prompts) or "none"
            raise LookupError(f"no prompt {prompt_id!r} was sent (known: {known})")
        label = shown.label(option_id)
        chat = self.chats.chat(shown.chat_id)
        source: JsonObject = {**_template(chat.source), "chat_id": shown.chat_id, "user_id": user}
        source["platform"] = shown.platform or chat.platform or "relay"
        source["user_name"] = user_name or user
        response: JsonObject = {"prompt_id": prompt_id, "option_id": option_id, "label": label}
        if shown.message_id is not None:
            response["prompt_message_id"] = shown.message_id
        event: JsonObject = {
            "text": f"/{option_id}",
            "message_type": "command",
            "message_id": f"u{next(self._injected)}",
            "source": source,
            "prompt_response": response,
        }
        buffer_id = self.buffer_inbound(event, gateway_id=shown.gateway_id)
        buffered_to = self._live_session(shown.gateway_id)
        for session in self._handshaken:
            sibling = session is not buffered_to and session.gateway_id == shown.gateway_id
            if sibling and session.is_open and not session.idle:
                session.send(InboundFrame(event))
        return buffer_id

    def press_stop(
        self,
        chat_id: str,
        *,
        user: str = "U1",
        user_name: str | None = None,
        session_key: str | None = None,
    ) -> bool:
        """A user presses stop in ``chat_id``: send ``interrupt_inbound {session_key,
        chat_id}`` to the gateway the chat's messages go to, live, as a real connector
        does (an interrupt is never buffered: one that finds no gateway connected is
        dropped). ``session_key`` defaults to ``"<platform>:<chat_id>"``. The press is
        in the chat's transcript (kind ``stop``) either way. Returns whether the frame
        was queued on a session."""
        chat = self.chats.chat(chat_id)
        gateway = chat.gateway_id or self._latest_gateway()
        platform = chat.platform or self._first_platform(gateway)
        self.chats.stop_pressed(chat_id, user_name or user)
        session = self._live_session(gateway)
        if session is None or session.idle:
            logger.info("stop pressed in %s: no gateway %s connected; dropped", chat_id, gateway)
            return False
        session.send(InterruptInbound(session_key or f"{platform}:{chat_id}", chat_id))
        return True

    def _live_session(self, gateway_id: str) -> Session | None:
        for session in reversed(self._handshaken):
            if session.gateway_id == gateway_id and session.is_open:
                return session
        return None

    def _latest_gateway(self) -> str:
        for session in reversed(self._handshaken):
            if session.is_open:
                return session.gateway_id
        return ANONYMOUS

    def _first_platform(self, gateway_id: str) -> str:
        session = self._live_session(gateway_id)
        if session is not None and session.hellos:
            return session.hellos[0].platform
        return "relay"

    def buffer_passthrough(self, forward: JsonObject, *, gateway_id: str = ANONYMOUS) -> str:
        """Like [`buffer_inbound`][trio_relay.testing.ReferenceConnector.buffer_inbound], for a
        ``passthrough_forward``."""
        frame = self.buffer.add(gateway_id, lambda bid: PassthroughFrame(forward, bid))
        self._deliver_now(gateway_id, frame)
        assert isinstance(frame, PassthroughFrame) and frame.buffer_id is not None
        return frame.buffer_id

    def _deliver_now(self, gateway_id: str, frame: Frame) -> None:
        # Only to a handshaken session: one still handshaking gets it from the replay,
        # and sending it here too would deliver it twice on the same connection.
        session = self._live_session(gateway_id)
        if session is not None and (not session.idle or not self.options.breaks.buffer_when_idle):
            self._send_delivery(session, frame)

    def _send_delivery(self, session: Session, frame: Frame) -> None:
        session.send(frame)
        if self.options.breaks.replay_delivered:
            return
        if isinstance(frame, (InboundFrame, PassthroughFrame)) and frame.buffer_id is not None:
            self.buffer.ack(session.gateway_id, frame.buffer_id)

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
        if self.options.on_session is not None:
            self.options.on_session(session, "open")
        self._notify()

    def _on_payload(self, session: Session, payload: str | bytes) -> None:
        for item in session.decoder.feed(payload):
            if isinstance(item, RejectedFrame):
                self.rejected.append(item)
                logger.warning("%r: rejected frame: %s (%r)", session, item.reason, item.sample)
                continue
            if session.observer is not None:
                session.observer(session, "in", item)
            if self.record:
                self.received.append(item)
            self._dispatch[type(item)](session, item)
        self._notify()

    def _on_hello(self, session: Session, frame: Hello) -> None:
        session.hellos.append(frame)
        descriptor = default_descriptor(frame.platform)
        # Every op of the protocol by default, as `trio-relay connector` advertises
        # (prompts included, so `relay.ask` shows buttons); `supported_ops: []` in
        # ``descriptors`` plays a connector of the legacy set.
        descriptor["supported_ops"] = list(OP_TABLE)
        if self.keys is not None:
            descriptor["idempotency_window_s"] = self.keys.window
        descriptor.update(self.descriptors.get(ANY_PLATFORM, {}))
        descriptor.update(self.descriptors.get(frame.platform, {}))
        session.descriptors[frame.platform] = descriptor
        session.supported_ops[frame.platform] = _supported_ops(descriptor)
        session.send(DescriptorFrame(descriptor))
        if not session.handshaken:
            session.handshaken = True
            self._handshaken.append(session)
            # At-least-once: everything unacknowledged goes again on every handshake.
            for delivery in self.buffer.frames(session.gateway_id):
                self._send_delivery(session, delivery)

    def _on_outbound(self, session: Session, frame: Outbound) -> None:
        self.outbound_count += 1
        if self.record:
            self.outbound.append(frame)
        refusal = self._refusal(session, frame) if self.options.validate else None
        entry: KeyEntry | None = None
        if refusal is None and self.keys is not None and IDEMPOTENCY_KEY in frame.action:
            refusal, entry = self._idempotent(session, frame)
            if refusal is None and entry is None:
                return  # a repeat: answered from the first attempt
        if refusal is None:
            refusal = self._injected_refusal(frame.action)
        if refusal is not None:
            logger.info("%r: refused %s: %s", session, frame.request_id, refusal.error)
            self._answer(session, frame, refusal.result(), entry=entry)
        elif self.outbound_handler is None:
            if frame.action.get("op") == "draft":
                result, step = self.drafts.apply(
                    frame.action, session.gateway_id, lambda: f"m{self.outbound_count}"
                )
                # A repeated seal is the same message: the transcript shows it once.
                self._answer(session, frame, result, record=step != "repeated_seal", entry=entry)
            else:
                self._answer(session, frame, self._carry_out(frame.action), entry=entry)
        else:
            session.start_soon(self._run_handler, self.outbound_handler, session, frame, entry)

    def _idempotent(
        self, session: Session, frame: Outbound
    ) -> tuple[ActionRefusal | None, KeyEntry | None]:
        """A keyed action: its first attempt's entry to fill (carry it out), a refusal
        (a malformed key, a conflict), or neither: a repeat, answered here."""
        assert self.keys is not None
        try:
            key = check_key(frame.action[IDEMPOTENCY_KEY])
        except (TypeError, ValueError) as exc:
            return ActionRefusal("invalid_action", f"invalid action: {exc}"), None
        now = trio.current_time()
        gateway_id = session.gateway_id
        entry = self.keys.find(gateway_id, key, now)
        if entry is None:
            return None, self.keys.start(gateway_id, key, frame.action, now)
        if not entry.matches(frame.action):
            result = self.keys.conflict()
            logger.info("%r: refused %s: %s", session, frame.request_id, result["error"])
            self.results.route(session, OutboundResult(frame.request_id, result), frame.action)
        elif entry.finished:
            self._replay(session, frame, entry)
        else:
            session.start_soon(self._replay_when_done, session, frame, entry)
        return None, None

    def _replay(self, session: Session, frame: Outbound, entry: KeyEntry) -> None:
        replayed = entry.replay()
        if replayed is not None:
            assert self.keys is not None
            self.keys.replays += 1
            self.results.route(session, OutboundResult(frame.request_id, replayed), frame.action)

    async def _replay_when_done(self, session: Session, frame: Outbound, entry: KeyEntry) -> None:
        await entry.wait()
        self._replay(session, frame, entry)
        self._notify()

    def _injected_refusal(self, action: Mapping[str, Any]) -> ActionRefusal | None:
        queued = self.refusals.get(str(action.get("op"))) if self.refusals else None
        if not queued:
            return None
        return queued.pop(0)

    def _refusal(self, session: Session, frame: Outbound) -> ActionRefusal | None:
        """Why the connector refuses ``frame``, as a real one would: a platform this
        connection never said hello for, an op that platform does not support, a
        malformed action, or a reply that does not name its chat's tenant."""
        platform = frame.platform
        if platform is None and session.hellos:
            platform = session.hellos[0].platform
        if frame.platform is not None and frame.platform not in session.descriptors:
            announced = ", ".join(session.descriptors) or "none"
            return ActionRefusal(
                "unknown_platform",
                f"platform {frame.platform!r} was not announced with a hello on this "
                f"connection (announced: {announced})",
            )
        supported = session.supported_ops.get(platform, LEGACY_OPS) if platform else LEGACY_OPS
        refusal = check_action(frame.action, supported)
        if refusal is not None:
            return refusal
        if OP_TABLE[frame.action["op"]].chat_addressed:
            declined = self.chats.declined_scope(frame.action)
            if declined is not None:
                logger.debug("%r: egress declined: %s", session, declined)
                chat_id = str(frame.action.get("chat_id"))
                return egress_declined(platform, with_code=self.chats.decline_has_code(chat_id))
        return None

    def _carry_out(self, action: Mapping[str, Any]) -> JsonObject:
        """The connector's own answer to a valid action: what a platform would return."""
        spec = OP_TABLE.get(action["op"])
        kind = spec.result if spec is not None else "message_id"
        if kind == "plain":
            return {"success": True}
        if kind == "thread_id":
            return {"success": True, "thread_id": f"t{self.outbound_count}"}
        if action["op"] == "send" and str(action["chat_id"]) in self.chats.auto_threads:
            # The connector's auto-thread policy: the reply opened a thread of its own.
            thread_id = f"t{self.outbound_count}"
            self.chats.open_thread(str(action["chat_id"]), thread_id)
            return {
                "success": True,
                "message_id": f"m{self.outbound_count}",
                "thread_id": thread_id,
                "auto_thread_name": f"Thread {thread_id}",
            }
        if kind == "chat_info":
            chat = self.chats.chat(str(action["chat_id"]))
            name = chat.source.get("chat_name") or chat.chat_id
            kind_of_chat = chat.source.get("chat_type") or "dm"
            return {"success": True, "chat_info": {"name": name, "type": kind_of_chat}}
        return {"success": True, "message_id": f"m{self.outbound_count}"}

    def _answer(
        self,
        session: Session,
        frame: Outbound,
        result: JsonObject,
        *,
        record: bool = True,
        entry: KeyEntry | None = None,
    ) -> None:
        if entry is not None:
            entry.finish(result)
        if record and result.get("success") is True:
            self.chats.carried_out(frame.action, result, session.gateway_id)
        self.results.route(session, OutboundResult(frame.request_id, result), frame.action)

    async def _run_handler(
        self,
        handler: OutboundHandler,
        session: Session,
        frame: Outbound,
        entry: KeyEntry | None = None,
    ) -> None:
        try:
            result = await handler(session, frame)
        except Exception as exc:
            # A connector whose backend failed still answers: with a failure.
            logger.exception("outbound handler failed for %s", frame.request_id)
            result = {"success": False, "error": f"connector handler failed: {exc!r}"}
        except BaseException:
            if entry is not None:
                entry.finish(None)  # (a repeat waiting on it is answered by no one)
            raise
        if result is not None:
            self._answer(session, frame, result, entry=entry)
        elif entry is not None:
            entry.finish(None)

    def _on_ack(self, session: Session, frame: InboundAck) -> None:
        self.acks.append(frame.buffer_id)
        if self.options.breaks.honour_acks:
            self.buffer.ack(session.gateway_id, frame.buffer_id)

    def _on_going_idle(self, session: Session, frame: GoingIdle) -> None:
        session.idle = True
        if self.options.breaks.ack_going_idle:
            session.send(GoingIdleAck())

    def _on_interrupt(self, session: Session, frame: Interrupt) -> None:
        pass  # fire-and-forget; ``received`` has it


def _supported_ops(descriptor: JsonObject) -> frozenset[str]:
    try:
        return Descriptor.from_wire(descriptor).effective_ops
    except FrameError:
        return LEGACY_OPS
