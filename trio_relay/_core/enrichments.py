"""Optional enrichments of an inbound event (docs/protocol.md, "Inbound event"):
the quoted message, the surrounding channel messages, and a press on a prompt's option.

Absent means the platform did not carry the data, so each decodes to ``None`` (or an
empty tuple) rather than failing the event; a malformed enrichment is treated as absent.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .wire_fields import text, wire_id

__all__ = ["ContextMessage", "PromptResponse", "ReplyTo", "context_from_wire"]


@dataclass(frozen=True)
class ReplyTo:
    """What the user quoted: its ``text`` and ``author`` when the platform carries them;
    ``is_own`` means the quoted message was the bot's own (a reply to our answer)."""

    text: str | None = None
    author: str | None = None
    is_own: bool = False
    raw: dict[str, Any] = field(default_factory=dict, hash=False, repr=False, compare=False)

    @classmethod
    def from_wire(cls, obj: object) -> ReplyTo | None:
        if not isinstance(obj, dict):
            return None
        author = obj.get("author")
        if isinstance(author, dict):  # some connectors send the author as a source
            author = text(author, "user_name") or text(author, "name")
        return cls(
            text=text(obj, "text"),
            author=author if isinstance(author, str) else None,
            is_own=obj.get("is_own") is True,
            raw=dict(obj),
        )


@dataclass(frozen=True)
class ContextMessage:
    """One read-only message around an addressed one (oldest first in
    ``event.context``): reference for the turn, never a turn of its own."""

    text: str
    user_name: str | None = None
    user_id: str | None = None

    @classmethod
    def from_wire(cls, obj: object) -> ContextMessage | None:
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            return None
        source = obj.get("source")
        source = source if isinstance(source, dict) else {}
        return cls(
            text=obj["text"],
            user_name=text(source, "user_name"),
            user_id=wire_id(source.get("user_id")),
        )


def context_from_wire(value: object) -> tuple[ContextMessage, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(m for m in map(ContextMessage.from_wire, value) if m is not None)


@dataclass(frozen=True)
class PromptResponse:
    """A press on one option of a prompt this or a sibling gateway sent."""

    prompt_id: str
    option_id: str
    label: str | None = None
    prompt_message_id: str | None = None

    @classmethod
    def from_wire(cls, obj: object) -> PromptResponse | None:
        if not isinstance(obj, dict):
            return None
        prompt_id, option_id = wire_id(obj.get("prompt_id")), wire_id(obj.get("option_id"))
        if not prompt_id or option_id is None:
            return None
        return cls(
            prompt_id=prompt_id,
            option_id=option_id,
            label=text(obj, "label"),
            prompt_message_id=wire_id(obj.get("prompt_message_id")),
        )
