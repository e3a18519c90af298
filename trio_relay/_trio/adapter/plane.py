"""The adapter plane of a relay: routes learned from inbound and filled into
outbound, text sent in pieces that fit, streaming replies, prompts, typing, and handlers
that get the relay.

:class:`AdapterPlane` is what :class:`~trio_relay._trio.relay.Relay` delegates to: each
of the relay's adapter methods (``send_text``, ``stream_reply``, ``ask``, ``typing``,
``descriptor_for``) is one call here, passing the relay as the narrow
:class:`~trio_relay._trio.adapter.port.RelayPort` it is written against (so nothing in
``adapter/`` imports the relay). It plugs into the inbound pipeline twice: routes are
recorded by a pre-handler step (in the message's lane, before ``on_message``), prompt
answers are taken by an intercept at submit (see :mod:`~trio_relay._trio.adapter.prompts`
for why that one cannot wait for the lane).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._core.config import RelayConfig
from ..._core.descriptor import Descriptor
from ..._core.event import MessageEvent, normalize_platform
from ..._core.handler_signature import takes_extra_argument
from ..._core.outcome import Outcome
from ..._core.prompts import OptionSpec, PromptAnswer
from ..._core.routes import RouteTable, routed_action
from .prompts import PromptBroker
from .streaming import StreamReply, open_stream_reply

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["AdapterPlane", "Routed", "bind_relay"]

logger = logging.getLogger("trio_relay")


@dataclass(frozen=True, slots=True)
class Routed:
    """An action after routing, and the envelope fields it travels with."""

    action: Mapping[str, Any]
    platform: str | None
    bot_id: str | None


class AdapterPlane:
    __slots__ = ("_bot_ids", "_edit_interval", "prompts", "routes")  # no __dict__: one per relay

    def __init__(self, config: RelayConfig, bot_ids: Mapping[str, str]) -> None:
        self.routes = RouteTable(config.route_cache_size, bot_ids)
        self._bot_ids = bot_ids  # (the relay's own mapping: no copy per relay)
        self._edit_interval = config.edit_interval
        self.prompts = PromptBroker()

    # --- inbound ---------------------------------------------------------------------

    async def record_route(self, event: MessageEvent) -> MessageEvent:
        """Pre-handler step: remember where this chat lives before its handler runs."""
        self.routes.record(event.source)
        return event

    def intercept(self, event: MessageEvent) -> bool:
        """Submit-time intercept: prompt answers are consumed here."""
        return self.prompts.intercept(event)

    # --- outbound --------------------------------------------------------------------

    def route(self, action: Mapping[str, Any], platform: str | None) -> Routed | None:
        """Fill the chat's routing metadata into ``action`` and name its platform;
        ``None`` when there is nothing to change (the common case is kept cheap: every
        request passes here).

        Only for an action with a string ``chat_id`` whose chat has a route, and only
        when the caller named no platform or the route's own: a chat id is only unique
        within its platform."""
        if not self.routes:
            return None
        try:
            chat_id = action.get("chat_id")
        except AttributeError:  # not a mapping: request() says so
            return None
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
        """See :meth:`Relay.descriptor_for`."""
        platform = self.platform_of(chat_id)
        if platform is not None:
            descriptor = relay.descriptors.get(platform)
            if descriptor is not None:
                return descriptor
            for name, candidate in relay.descriptors.items():
                if normalize_platform(name) == normalize_platform(platform):
                    return candidate
        if relay.default_platform is None:
            return None
        return relay.descriptors.get(relay.default_platform)

    async def send_text(
        self, relay: RelayPort, chat_id: str, text: str, *, reply_to: str | None = None
    ) -> list[Outcome]:
        """See :meth:`Relay.send_text`."""
        descriptor = self.descriptor_for(relay, chat_id)
        pieces = (
            descriptor.split_text(text) if descriptor is not None else ([text] if text else [])
        )
        outcomes: list[Outcome] = []
        for index, piece in enumerate(pieces):
            action: dict[str, Any] = {"op": "send", "chat_id": chat_id, "content": piece}
            if reply_to is not None and index == 0:
                action["reply_to"] = reply_to
            outcome = await relay.request(action)
            outcomes.append(outcome)
            if not outcome.success:
                # Later pieces would read as a reply with a hole in it; and after an
                # ambiguous one, sending on could post the rest twice on a retry.
                logger.warning(
                    "send_text to %s: piece %d of %d failed (%s); the rest was not sent",
                    chat_id,
                    index + 1,
                    len(pieces),
                    outcome.error,
                )
                break
        return outcomes

    def stream_reply(
        self, relay: RelayPort, chat_id: str, *, reply_to: str | None = None
    ) -> AbstractAsyncContextManager[StreamReply]:
        """See :meth:`Relay.stream_reply`."""
        return open_stream_reply(
            relay, chat_id, reply_to=reply_to, edit_interval=self._edit_interval
        )

    async def ask(
        self,
        relay: RelayPort,
        chat_id: str,
        question: str,
        options: Iterable[OptionSpec],
        *,
        kind: str,
        timeout: float | None,
        reply_to: str | None,
    ) -> PromptAnswer | None:
        """See :meth:`Relay.ask`."""
        return await self.prompts.ask(
            relay, chat_id, question, options, kind=kind, timeout=timeout, reply_to=reply_to
        )

    async def typing(self, relay: RelayPort, chat_id: str, *, status: str | None) -> Outcome:
        """See :meth:`Relay.typing`."""
        action: dict[str, Any] = {"op": "typing", "chat_id": chat_id}
        if status is not None:
            action["content"] = status
        return await relay.request(action)


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
