"""The adapter plane of a relay: routes learned from inbound and filled into
outbound, format hints kept only where the platform renders them, drafts never sent
after their seal, text sent in pieces that fit, streaming replies, task cards, prompts,
typing, and handlers that get the relay.

`AdapterPlane` is what [`Relay`][trio_relay.Relay] delegates to: each
of the relay's adapter methods (``send_text``, ``stream_reply``, ``task_card``,
``ask``, ``typing``, ``descriptor_for``) is one call here, passing the relay as the narrow
`RelayPort` it is written against (so nothing in
``adapter/`` imports the relay). It plugs into the inbound pipeline twice: routes are
recorded by a pre-handler step (in the message's lane, before ``on_message``), prompt
answers are taken by an intercept at submit (see `prompts`
for why that one cannot wait for the lane).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._core import outcome as _outcome
from ..._core.config import RelayConfig
from ..._core.descriptor import Descriptor
from ..._core.event import MessageEvent, normalize_platform
from ..._core.handler_signature import takes_extra_argument
from ..._core.outcome import Outcome
from ..._core.prompts import OptionSpec, PromptAnswer
from ..._core.routes import RouteTable, routed_action
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
        "prompts",
        "routes",
        "sealed",
    )

    def __init__(self, config: RelayConfig, bot_ids: Mapping[str, str]) -> None:
        self.routes = RouteTable(config.route_cache_size, bot_ids)
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
        """Pre-handler step: remember where this chat lives before its handler runs."""
        self.routes.record(event.source)
        return event

    def intercept(self, event: MessageEvent) -> bool:
        """Submit-time intercept: prompt answers are consumed here."""
        return self.prompts.intercept(event)

    # --- outbound --------------------------------------------------------------------

    def route(
        self, relay: RelayPort, action: Mapping[str, Any], platform: str | None
    ) -> Routed | None:
        """Fill the chat's routing metadata into ``action`` and name its platform,
        strip format hints the platform would not render, and refuse a draft after its
        seal; ``None`` when there is nothing to change (the common case is kept cheap:
        every request passes here).

        Routing applies only to an action with a string ``chat_id`` whose chat has a
        route, and only when the caller named no platform or the route's own: a chat id
        is only unique within its platform."""
        try:
            op = action.get("op")
            metadata = action.get("metadata")
        except AttributeError:  # not a mapping: request() says so
            return None
        if op == "draft":
            refused = self._check_draft(action)
            if refused is not None:
                return Routed(action, platform, None, refused)
        routed = self._route(action, platform)
        if type(metadata) is dict and FORMAT_HINTS in metadata:
            return self._format_hints(relay, action, platform, routed)
        return routed

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
