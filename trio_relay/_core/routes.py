"""Routing metadata, learned from inbound and filled into outbound (docs/protocol.md,
"Routing metadata").

A connector routes and authorises a reply by the tenant discriminators of the chat's
inbound: ``metadata.scope_id`` and ``metadata.user_id``, the envelope's ``platform`` and
``botId``, and on a gateway serving several profiles over one connection
``metadata.profile``. A Discord reply without its guild's ``scope_id`` is declined. So the
relay remembers, per chat, what the last inbound of that chat carried
([`RouteTable`][trio_relay.RouteTable], a bounded LRU) and fills whatever the caller left out of a
request addressed to that chat. What the caller set is never overwritten.

``profile`` is echoed whenever the chat's latest inbound carried ``source.profile``, and
never when it did not. A connector stamps ``source.profile`` only on a gateway that
serves several profiles, so that rule alone keeps a single-profile gateway's frames
byte-identical to those of a gateway that knows nothing of profiles. (Waiting until a
second profile had been seen, as an earlier version did, sent every reply to the first
profile's chats without it, and the connector could route such a chat's next turn to
another profile.)

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .event import Source, normalize_platform

__all__ = ["Route", "RouteTable", "routed_action"]

@dataclass(frozen=True, slots=True)
class Route:
    """What the latest inbound of one chat said about where it lives."""

    platform: str
    bot_id: str | None = None
    scope_id: str | None = None
    user_id: str | None = None
    profile: str | None = None
    thread_id: str | None = None


class RouteTable:
    """Per-chat routes, least recently used evicted past ``size`` chats.

    ``bot_ids`` maps each configured identity's platform to its bot id; a route's
    platform takes the identity's spelling when the two name the same platform
    (``"Slack"`` and ``"slack"``), so the envelope matches the ``hello``.
    """

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = ("_bot_ids", "_identities", "_routes", "size")

    def __init__(self, size: int, bot_ids: Mapping[str, str] | None = None) -> None:
        if size < 1:
            raise ValueError(f"route cache size must be at least 1, got {size!r}")
        self.size = size
        self._routes: OrderedDict[str, Route] = OrderedDict()
        self._bot_ids = bot_ids
        self._identities: dict[str, tuple[str, str]] | None = None
        """Normalised platform -> (spelling, bot id); made by the first record (an idle
        relay records nothing)."""

    def __len__(self) -> int:
        return len(self._routes)

    def __contains__(self, chat_id: object) -> bool:
        return chat_id in self._routes

    def get(self, chat_id: str) -> Route | None:
        """The route of ``chat_id`` (marking it recently used), or ``None``."""
        route = self._routes.get(chat_id)
        if route is not None:
            self._routes.move_to_end(chat_id)
        return route

    def record(self, source: Source) -> Route | None:
        """Remember where ``source``'s chat lives; returns the route, or ``None`` when
        the source names no chat or no platform (nothing to route by)."""
        if not source.chat_id or not normalize_platform(source.platform):
            return None
        identities = self._identities
        if identities is None:
            identities = self._identities = {
                normalize_platform(p): (p, b) for p, b in (self._bot_ids or {}).items()
            }
        platform, bot_id = identities.get(
            normalize_platform(source.platform), (source.platform.strip(), None)
        )
        wire_bot = source.raw.get("bot_id", source.raw.get("botId"))
        if isinstance(wire_bot, str) and wire_bot:
            bot_id = wire_bot
        route = Route(
            platform=platform,
            bot_id=bot_id or None,
            scope_id=source.scope_id,
            user_id=source.user_id,
            profile=source.profile or None,
            thread_id=source.thread_id,
        )
        self._routes[source.chat_id] = route
        self._routes.move_to_end(source.chat_id)
        while len(self._routes) > self.size:
            self._routes.popitem(last=False)
        return route

    def prime(self, source: Source | Mapping[str, Any]) -> Route | None:
        """Seed a chat's route before any inbound of it arrived (a cold start after a
        restart): ``source`` is a [`Source`][trio_relay.Source] or its wire form (``platform``,
        ``chat_id``, ``scope_id``, ``user_id``, ``profile``, ...), e.g. as saved from
        an earlier event's ``source.raw``."""
        if not isinstance(source, Source):
            source = Source.from_wire(dict(source))
        return self.record(source)

    def forget(self, chat_id: str) -> None:
        """Drop what is known of ``chat_id``'s route (nothing happens if none is)."""
        self._routes.pop(chat_id, None)


def routed_action(action: Mapping[str, Any], route: Route) -> Mapping[str, Any]:
    """``action`` with the route's discriminators added to its ``metadata`` where the
    caller left them out; the same object when there is nothing to add (so an action
    that needs nothing encodes exactly as before). Never mutates ``action``."""
    # Every chat-addressed op, get_chat_info included (its row lists no metadata, but
    # the protocol asks it of every frame addressed to a chat, and readers ignore
    # fields they do not know).
    if action.get("op") == "follow_up":
        # follow_up carries its profile inside its session_key namespace instead.
        return action
    metadata = action.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        return action  # the caller's own (malformed) metadata: theirs to fix, not ours
    # route.profile is None when the chat's latest inbound carried no profile.
    wanted = {"scope_id": route.scope_id, "user_id": route.user_id, "profile": route.profile}
    current = metadata or {}
    missing = {k: v for k, v in wanted.items() if v is not None and k not in current}
    if not missing:
        return action
    filled = dict(action)
    filled["metadata"] = {**current, **missing}
    return filled
