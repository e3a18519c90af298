"""Inbound chat events with attribute access (docs/protocol.md, "Inbound event").

Decoding is lenient on purpose: an inbound event is a user's message, and dropping it
because one field has an unexpected type would lose the message. Each field falls back to
a default instead, and numeric ids (Telegram, Discord) become strings so that one id has
one spelling; the readers that say so live in ``wire_fields.py``, shared with the
enrichments' decoders (``enrichments.py``). The trust fields of a source
(`TRUST_FIELDS`) are the exception: only JSON ``true``/``false`` count, anything else
is ``None`` (unknown), because a control that trusts ``"false"`` or ``0`` would be
fooled; the pipeline counts and logs each such value (`rejected_trust_fields`). Fields
this version does not model stay reachable as attributes through ``raw``
(``event.some_new_field``), so a newer connector does not need a new library.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .enrichments import ContextMessage, PromptResponse, ReplyTo, context_from_wire
from .frames import FrameError
from .wire_fields import choice, first_text, flag, text, wire_id

__all__ = [
    "CHAT_TYPES",
    "MESSAGE_TYPES",
    "Media",
    "MessageEvent",
    "TRUST_FIELDS",
    "Source",
    "escape_key_part",
    "normalize_platform",
    "rejected_trust_fields",
]

TRUST_FIELDS = ("is_bot", "message_is_edit", "one_to_one_verified")
"""The source fields a room control may rely on: booleans, ``None`` when not sent."""

MESSAGE_TYPES = frozenset(
    {"text", "photo", "video", "audio", "voice", "document", "sticker", "location", "command"}
)
CHAT_TYPES = frozenset({"dm", "group", "channel", "thread", "forum"})


def normalize_platform(platform: object) -> str:
    """The canonical spelling of a platform name: an enum's value, stripped and
    lower-cased, so ``Platform.SLACK`` and ``"Slack "`` name the same platform."""
    # Checked before str: a (str, Enum) member's str() is "Platform.SLACK" on 3.10.
    if isinstance(platform, enum.Enum):
        platform = platform.value
    if platform is None:
        return ""
    name = platform if isinstance(platform, str) else str(platform)
    return name.strip().lower()


def rejected_trust_fields(source: dict[str, Any]) -> list[str]:
    """The trust fields present in a wire ``source`` whose value is not a JSON boolean
    (``null``, ``0``, ``"true"``, ...): bad input, decoded as ``None``."""
    return [key for key in TRUST_FIELDS if key in source and not isinstance(source[key], bool)]


def escape_key_part(value: str) -> str:
    """One part of a dedupe key, ``:`` and ``%`` percent-escaped."""
    # Escaping ':' (and the escape character) keeps dedupe keys injective: without it
    # chat "a:b" + message "c" and chat "a" + message "b:c" would share a key.
    return value.replace("%", "%25").replace(":", "%3A")


class _RawFields:
    """Makes unknown wire fields readable as attributes, from ``self.raw``."""

    raw: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup failed. copy and pickle probe for names such
        # as __setstate__ on a half-built instance that has no ``raw`` yet; answering
        # those from ``raw`` would recurse, so private and dunder names are never fields.
        if name.startswith("_") or name == "raw":
            raise AttributeError(name)
        try:
            return self.raw[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r}, and the wire "
                f"object has no field {name!r}"
            ) from None


@dataclass(frozen=True)
class Media:
    """One attachment of an inbound message."""

    url: str
    mime: str | None = None
    kind: str | None = None
    size: int | None = None
    filename: str | None = None
    caption: str | None = None
    path: Path | None = None
    """Where the relay downloaded it (``RelayConfig(download_media=True)``), valid while
    the handler runs; ``None`` when not downloaded (not re-hosted, or it failed)."""

    @classmethod
    def from_wire(cls, obj: object) -> Media | None:
        """Decode one ``media`` entry, or ``None`` if it has no usable ``url``."""
        if not isinstance(obj, dict):
            return None
        url = obj.get("url")
        if not isinstance(url, str) or not url:
            return None
        size = obj.get("size")
        return cls(
            url=url,
            mime=text(obj, "mime"),
            kind=text(obj, "kind"),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            filename=text(obj, "filename"),
            caption=text(obj, "caption"),
        )


@dataclass(frozen=True)
class Source(_RawFields):
    """Where an inbound message came from: platform, chat, user and thread, and the
    trust fields (``is_bot``, ``message_is_edit``, ``one_to_one_verified``).

    Each trust field is ``True``/``False`` as the connector sent it, or ``None`` when it
    did not send one (or sent something other than a JSON boolean): a room control that
    depends on one must then fail closed (treat ``None`` as "not verified", "maybe a
    bot", "maybe an edit")."""

    platform: str = ""
    chat_id: str | None = None
    chat_type: str = "dm"
    chat_name: str | None = None
    user_id: str | None = None
    user_name: str | None = None
    thread_id: str | None = None
    scope_id: str | None = None
    profile: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)
    # After ``raw``, so that positional construction keeps its meaning.
    is_bot: bool | None = None
    """The author is a bot."""
    message_is_edit: bool | None = None
    """This event is an edit of an earlier message."""
    one_to_one_verified: bool | None = None
    """The chat is verified to be a one-to-one chat with this user."""
    message_id: str | None = None
    """The message's id as the source names it; where the source has none, the event's
    top-level ``message_id`` (as the connector's own gateway reads it)."""

    @classmethod
    def from_wire(cls, obj: object, *, message_id: object = None) -> Source:
        """Decode an event's ``source``; raises `FrameError` only if it is not
        an object. ``message_id`` is the event's top-level ``message_id`` as on the
        wire: the fallback of the source's own."""
        if not isinstance(obj, dict):
            raise FrameError(f"event source must be an object, got {type(obj).__name__}")
        platform = obj.get("platform")
        chat_type = obj.get("chat_type")
        scope_id = wire_id(obj.get("scope_id"))
        own_id = wire_id(obj.get("message_id")) or wire_id(message_id)
        return cls(
            platform=platform if isinstance(platform, str) else "",
            chat_id=wire_id(obj.get("chat_id")),
            chat_type=choice(chat_type, CHAT_TYPES, "dm"),
            chat_name=text(obj, "chat_name"),
            user_id=wire_id(obj.get("user_id")),
            user_name=first_text(obj, "user_name", "user_display_name", "user_handle"),
            thread_id=wire_id(obj.get("thread_id")),
            # guild_id is the name older connectors used (Discord's word for it).
            scope_id=scope_id if scope_id is not None else wire_id(obj.get("guild_id")),
            profile=text(obj, "profile"),
            raw=dict(obj),
            is_bot=flag(obj, "is_bot"),
            message_is_edit=flag(obj, "message_is_edit"),
            one_to_one_verified=flag(obj, "one_to_one_verified"),
            message_id=own_id,
        )


@dataclass(frozen=True)
class MessageEvent(_RawFields):
    """A user's message, delivered by the connector (``inbound`` frame's ``event``).

    Enrichments, when the platform carried them: ``reply_to`` (what the user quoted),
    ``context`` (read-only surrounding messages, oldest first; ``context_error`` when
    the connector could not fetch them) and ``prompt_response`` (a press on a prompt's
    option; [`Relay.ask`][trio_relay.Relay.ask] consumes those of its own prompts before any
    handler).
    """

    text: str = ""
    message_type: str = "text"
    message_id: str | None = None
    reply_to_message_id: str | None = None
    media_urls: tuple[str, ...] = ()
    media: tuple[Media, ...] = ()
    source: Source = field(default_factory=Source)
    reply_to: ReplyTo | None = None
    context: tuple[ContextMessage, ...] = ()
    context_error: bool = False
    prompt_response: PromptResponse | None = None
    raw: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)
    attempt: int = 1
    """Which run of this delivery's handler this is: 1 for the first, 2 after one
    failure (retried in the same session after a short backoff, or redelivered), up to
    ``RelayConfig.max_delivery_attempts``. Not a wire field."""

    @classmethod
    def from_wire(cls, obj: object) -> MessageEvent:
        """Decode a wire event; raises `FrameError` only if it is not an object.
        Any field of the wrong type falls back to its default."""
        if not isinstance(obj, dict):
            raise FrameError(f"event must be an object, got {type(obj).__name__}")
        body = obj.get("text")
        message_type = obj.get("message_type")
        message_id = obj.get("message_id")
        media_urls = obj.get("media_urls")
        media = obj.get("media")
        source = obj.get("source")
        # The source first: its message_id falls back to the event's (read from the
        # wire there, so the whole source is read in one go).
        decoded_source = Source.from_wire(
            source if isinstance(source, dict) else {}, message_id=message_id
        )
        return cls(
            text=body if isinstance(body, str) else "",
            message_type=choice(message_type, MESSAGE_TYPES, "text"),
            message_id=wire_id(message_id),
            reply_to_message_id=wire_id(obj.get("reply_to_message_id")),
            media_urls=(
                tuple(u for u in media_urls if isinstance(u, str))
                if isinstance(media_urls, list)
                else ()
            ),
            media=(
                tuple(m for m in map(Media.from_wire, media) if m is not None)
                if isinstance(media, list)
                else ()
            ),
            source=decoded_source,
            reply_to=ReplyTo.from_wire(obj.get("reply_to")),
            context=context_from_wire(obj.get("context")),
            context_error=obj.get("context_error") is True,
            prompt_response=PromptResponse.from_wire(obj.get("prompt_response")),
            raw=dict(obj),
        )

    @property
    def dedupe_key(self) -> str | None:
        """``"platform:chat_id:message_id"`` identifying this message across redeliveries,
        or ``None`` when any part is missing: such events are never treated as
        duplicates (fail open), since dropping a real message is worse than a repeat.
        The message id is the event's own, else the source's (``source.message_id``):
        a connector that names the message only on its source is still deduplicated.

        A ``:`` or ``%`` inside a part is percent-escaped so that distinct messages
        never share a key."""
        source = self.source
        platform = normalize_platform(source.platform)
        chat_id = source.chat_id
        message_id = self.message_id or source.message_id
        if not platform or not chat_id or not message_id:
            return None
        return ":".join(map(escape_key_part, (platform, chat_id, message_id)))
