"""The adapter plane of a relay: routes learned from inbound and filled into
outbound, format hints kept only where the platform renders them, drafts never sent
after their seal, chats latched after an egress decline, text sent in pieces that fit,
streaming replies, task cards, prompts, typing, and handlers that get the relay.

`AdapterPlane` is what [`Relay`][trio_relay.Relay] delegates to: each
of the relay's adapter methods (``send_text``, ``stream_reply``, ``task_card``,
``ask``, ``typing``, ``descriptor_for``) is one call here, passing the relay as the narrow
`RelayPort` it is written against (so nothing in
``adapter/`` imports the relay). It plugs into the inbound pipeline twice: routes are
recorded (and a chat's decline latch lifted) by a pre-handler step (in the message's
lane, right before ``on_message``), prompt answers are taken by an intercept at submit
(see `prompts` for why that one cannot wait for the lane).

Every request of the plane, and every request of the caller, goes through the relay's
one send point (``Relay.request``), which asks `AdapterPlane.route` before it sends and
tells `AdapterPlane.settled` how it ended: the one place where the decline latch
(``_core/declines.py``) refuses and learns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._core import outcome as _outcome
from ..._core.config import RelayConfig
from ..._core.declines import DeclineLatch
from ..._core.descriptor import Descriptor
from ..._core.event import MessageEvent, normalize_platform
from ..._core.handler_signature import takes_extra_argument
from ..._core.outcome import Outcome
from ..._core.prompts import OptionSpec, PromptAnswer
from ..._core.routes import RouteTable, routed_action
from ..._core.stats import RelayStats
from .prompts import PromptBroker
from .sending import FORMAT_HINTS, send_pieces
from .streaming import StreamReply, open_stream_reply
from .task_cards import TaskCard, open_task_card

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["AdapterPlane", "Routed", "SealedDrafts", "bind_relay"]

logger = logging.getLogger("trio_relay")


SEALED_DRAFTS = 4096
"""Sealed draft ids remembered per relay (the oldest is forgotten first): far more than
the replies a relay streams at once, and a straggler comes right after its seal."""


@dataclass(frozen=True, slots=True)
class Routed:
    """An action after routing, and the envelope fields it travels with; ``refused``
    is the outcome of an action that must not be sent at all."""

    action: Mapping[str, Any]
    platform: str | None
    bot_id: str | None
    refused: Outcome | None = None


class SealedDrafts:
    """The ``draft_id`` of every seal (a ``draft`` with ``final: true``) this relay
    sent, so that a draft for it afterwards (a straggler) is never sent: the connector
    ignores drafts after the seal (docs/protocol.md, "Live cards"). A repeated seal is
    not a straggler: the connector answers it with the same message (idempotent)."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[int, bool] = {}  # draft id -> a straggler was already logged

    def __bool__(self) -> bool:
        return bool(self._ids)

    def __contains__(self, draft_id: object) -> bool:
        return draft_id in self._ids

    def seal(self, draft_id: int) -> None:
        if draft_id not in self._ids:
            self._ids[draft_id] = False
            if len(self._ids) > SEALED_DRAFTS:
                self._ids.pop(next(iter(self._ids)))

    def straggler(self, draft_id: int, chat_id: object) -> Outcome:
        """The outcome of a draft for a sealed id; the first one is logged."""
        if not self._ids[draft_id]:
            self._ids[draft_id] = True
            logger.warning(
                "a draft for %s (draft_id %d) came after its seal and was not sent: the "
                "reply was already final (a write after the stream ended?)",
                chat_id,
                draft_id,
            )
        return _outcome.draft_sealed(draft_id)


class AdapterPlane:
    # No __dict__: one per relay.
    __slots__ = (
        "_bot_ids",
        "_close_timeout",
        "_edit_interval",
        "_hints_stripped",
        "_stats",
        "declines",
        "prompts",
        "routes",
        "sealed",
    )

    def __init__(
        self, config: RelayConfig, bot_ids: Mapping[str, str], stats: RelayStats
    ) -> None:
        self.routes = RouteTable(config.route_cache_size, bot_ids)
        self._stats = stats
        self.declines = DeclineLatch(config.route_cache_size) if config.latch_declines else None
        """The chats latched after an egress decline; ``None`` when
        ``RelayConfig(latch_declines=False)``."""
        self._bot_ids = bot_ids  # (the relay's own mapping: no copy per relay)
        self._edit_interval = config.edit_interval
        self._close_timeout = config.close_timeout
        self.prompts = PromptBroker()
        self.sealed = SealedDrafts()
        # The platforms already logged; a tuple made on the first (an empty set is 216
        # bytes, held by every idle relay, and most never strip a hint).
        self._hints_stripped: tuple[str, ...] = ()

    # --- inbound ---------------------------------------------------------------------

    async def record_route(self, event: MessageEvent) -> MessageEvent:
        """Pre-handler step: the message is about to be handed to its handler, so
        remember where its chat lives, and lift the chat's decline latch (it spoke
        again: a raw frame, or one dropped by dedupe, never gets here)."""
        source = event.source
        self.routes.record(source)
        declines = self.declines
        if declines is not None and declines.chats:
            lifted = declines.admitted(source.chat_id)
            if lifted is not None:
                logger.info(
                    "chat %r spoke again: its egress decline latch is lifted", lifted
                )
        return event

    def intercept(self, event: MessageEvent) -> bool:
        """Submit-time intercept: prompt answers are consumed here."""
        return self.prompts.intercept(event)

    # --- outbound --------------------------------------------------------------------

    def route(
        self, relay: RelayPort, action: Mapping[str, Any], platform: str | None
    ) -> Routed | None:
        """Fill the chat's routing metadata into ``action`` and name its platform,
        strip format hints the platform would not render, refuse content for a latched
        chat and a draft after its seal; ``None`` when there is nothing to change (the
        common case is kept cheap: every request passes here).

        Routing applies only to an action with a string ``chat_id`` whose chat has a
        route, and only when the caller named no platform or the route's own: a chat id
        is only unique within its platform."""
        try:
            op = action.get("op")
            metadata = action.get("metadata")
        except AttributeError:  # not a mapping: request() says so
            return None
        declines = self.declines
        if declines is not None and declines.chats:
            latched = declines.refusal(action)
            if latched is not None:
                self._stats.requests_latched += 1
                logger.debug("%s to %r not sent: %s", op, action.get("chat_id"), latched.error)
                return Routed(action, platform, None, latched)
        if op == "draft":
            refused = self._check_draft(action)
            if refused is not None:
                return Routed(action, platform, None, refused)
        routed = self._route(action, platform)
        if type(metadata) is dict and FORMAT_HINTS in metadata:
            return self._format_hints(relay, action, platform, routed)
        return routed

    def settled(self, relay: RelayPort, action: Mapping[str, Any], outcome: Outcome) -> None:
        """How a request sent by the send point ended: a definite decline of content
        latches its chat (one WARNING a latch), and a send's new thread is remembered as
        its chat's. Called only while latching is on, for a failure or a ``send``."""
        assert self.declines is not None
        latched = self.declines.settled(action, outcome)
        if latched is None:
            return
        self._stats.declines_latched += 1
        logger.warning(
            "the connector declined egress to chat %r (%s): its content requests are "
            "answered at once, without a frame, until an inbound message of it is "
            "handled (RelayConfig.latch_declines)",
            latched,
            outcome.error,
            extra={"relay": relay.name, "cause": outcome.code},
        )

    def latched_chats(self) -> tuple[str, ...]:
        """The chats latched now, oldest first (empty while latching is off)."""
        return () if self.declines is None else tuple(self.declines.chats)

    def _check_draft(self, action: Mapping[str, Any]) -> Outcome | None:
        draft_id = action.get("draft_id")
        if type(draft_id) is not int:
            return None  # malformed: the connector says what is wrong with it
        if action.get("final") is True:
            self.sealed.seal(draft_id)
        elif self.sealed and draft_id in self.sealed:
            return self.sealed.straggler(draft_id, action.get("chat_id"))
        return None

    def _format_hints(
        self,
        relay: RelayPort,
        action: Mapping[str, Any],
        platform: str | None,
        routed: Routed | None,
    ) -> Routed | None:
        """Keep ``metadata.format_hints`` only for a platform whose descriptor has
        ``supports_block_formatting`` (docs/protocol.md, "Format hints")."""
        target = routed.platform if routed is not None else platform
        chat_id = action.get("chat_id")
        if target is not None:
            descriptor = descriptor_of_platform(relay, target)
        elif type(chat_id) is str:
            descriptor = self.descriptor_for(relay, chat_id)
        else:
            descriptor = descriptor_of_platform(relay, relay.default_platform)
        if descriptor is not None and descriptor.supports_block_formatting:
            return routed
        name = descriptor.platform if descriptor is not None else (target or "?")
        if name not in self._hints_stripped:
            self._hints_stripped += (name,)
            logger.debug(
                "format hints stripped for platform %r: its descriptor does not have "
                "supports_block_formatting (logged once per platform)",
                name,
            )
        current = routed.action if routed is not None else action
        stripped = dict(current)
        metadata = {k: v for k, v in current["metadata"].items() if k != FORMAT_HINTS}
        if metadata:
            stripped["metadata"] = metadata
        else:
            del stripped["metadata"]  # as if no hints were given: the same bytes
        if routed is None:
            return Routed(stripped, platform, None)
        return Routed(stripped, routed.platform, routed.bot_id)

    def _route(self, action: Mapping[str, Any], platform: str | None) -> Routed | None:
        if not self.routes:
            return None
        chat_id = action.get("chat_id")
        route = self.routes.get(chat_id) if type(chat_id) is str else None
        if route is None:
            return None
        if platform is not None and normalize_platform(platform) != normalize_platform(
            route.platform
        ):
            return None
        filled = routed_action(action, route)
        if platform is None and route.platform not in self._bot_ids:
            # A platform we never said hello for cannot name the envelope: the
            # connector would refuse it. The metadata still goes.
            return Routed(filled, None, None)
        return Routed(filled, platform or route.platform, route.bot_id)

    def platform_of(self, chat_id: str) -> str | None:
        route = self.routes.get(chat_id)
        return None if route is None else route.platform

    # --- the relay's adapter methods (see their docstrings on Relay) ------------------

    def descriptor_for(self, relay: RelayPort, chat_id: str) -> Descriptor | None:
        """See [`Relay.descriptor_for`][trio_relay.Relay.descriptor_for]."""
        descriptor = descriptor_of_platform(relay, self.platform_of(chat_id))
        if descriptor is not None:
            return descriptor
        if relay.default_platform is None:
            return None
        return relay.descriptors.get(relay.default_platform)

    async def send_text(
        self,
        relay: RelayPort,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> list[Outcome]:
        """See [`Relay.send_text`][trio_relay.Relay.send_text]."""
        descriptor = self.descriptor_for(relay, chat_id)
        pieces = (
            descriptor.split_text(text) if descriptor is not None else ([text] if text else [])
        )
        return await send_pieces(
            relay, chat_id, pieces, reply_to=reply_to, format_hints=format_hints
        )

    def stream_reply(
        self,
        relay: RelayPort,
        chat_id: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[StreamReply]:
        """See [`Relay.stream_reply`][trio_relay.Relay.stream_reply]."""
        return open_stream_reply(
            relay,
            chat_id,
            reply_to=reply_to,
            edit_interval=self._edit_interval,
            format_hints=format_hints,
            close_timeout=self._close_timeout,
        )

    def task_card(
        self, relay: RelayPort, chat_id: str, *, reply_to: str | None = None
    ) -> AbstractAsyncContextManager[TaskCard]:
        """See [`Relay.task_card`][trio_relay.Relay.task_card]."""
        return open_task_card(relay, chat_id, reply_to=reply_to, close_timeout=self._close_timeout)

    async def ask(
        self,
        relay: RelayPort,
        chat_id: str,
        question: str,
        options: Iterable[OptionSpec],
        *,
        kind: str,
        # ASYNC109: carries Relay.ask's timeout=.
        timeout: float | None,  # noqa: ASYNC109
        reply_to: str | None,
    ) -> PromptAnswer | None:
        """See [`Relay.ask`][trio_relay.Relay.ask]."""
        return await self.prompts.ask(
            relay, chat_id, question, options, kind=kind, timeout=timeout, reply_to=reply_to
        )

    async def typing(self, relay: RelayPort, chat_id: str, *, status: str | None) -> Outcome:
        """See [`Relay.typing`][trio_relay.Relay.typing]."""
        action: dict[str, Any] = {"op": "typing", "chat_id": chat_id}
        if status is not None:
            action["content"] = status
        return await relay.request(action)


def descriptor_of_platform(relay: RelayPort, platform: str | None) -> Descriptor | None:
    """The descriptor of ``platform`` (spelled any way), or ``None``."""
    if platform is None:
        return None
    descriptor = relay.descriptors.get(platform)
    if descriptor is not None:
        return descriptor
    for name, candidate in relay.descriptors.items():
        if normalize_platform(name) == normalize_platform(platform):
            return candidate
    return None


def bind_relay(
    handler: Callable[..., Awaitable[None]] | None, arity: int, get_relay: Callable[[], RelayPort]
) -> Callable[..., Awaitable[None]] | None:
    """``handler`` as the pipeline calls it (``arity`` arguments), passing the relay as
    one more argument when the handler takes it (``async def on_message(event,
    relay)``). Decided once, here, from the signature: never by trial and error."""
    if handler is None or not takes_extra_argument(handler, arity):
        return handler
    bound = handler

    async def with_relay(*args: Any) -> None:
        await bound(*args, get_relay())

    return with_relay
