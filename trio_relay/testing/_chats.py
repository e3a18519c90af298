"""What the reference connector knows about each chat: its tenant, its transcript, the
prompts shown in it.

A real connector learns a chat's tenant (``scope_id``: a Discord guild, a Slack
workspace) from the platform and authorises every reply against it (docs/protocol.md,
"Routing metadata"); the reference connector learns it from the inbound events it sends.
The transcript is the chat as its users would see it, oldest first, so a test (or a
person at ``trio-relay connector``) can read a conversation instead of frame lists.

Plain data: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

JsonObject = dict[str, Any]


def _text(value: object) -> str | None:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One thing that happened in a chat.

    ``direction`` is ``"in"`` for what a user did (a message, a button press) and
    ``"out"`` for what the gateway did to the chat (an op the connector carried out).
    ``kind`` is the inbound ``message_type`` (``"prompt_response"`` for a press,
    ``"stop"`` for a press of stop) or the
    op name (``"seal"`` for a ``draft`` with ``final: true``, the live card's end).
    ``format_hints`` are the action's ``metadata.format_hints``, if it had any. ``raw``
    is the event or the action as it was on the wire.
    """

    direction: Literal["in", "out"]
    kind: str
    text: str | None
    who: str
    message_id: str | None = None
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)
    format_hints: JsonObject | None = field(default=None, compare=False)

    def __str__(self) -> str:
        ref = f" #{self.message_id}" if self.message_id else ""
        text = "" if self.text is None else f": {self.text}"
        if self.direction == "in":
            kind = "" if self.kind == "text" else f" [{self.kind}]"
            return f"{self.who}{kind}{ref}{text}"
        hints = "" if self.format_hints is None else f" {{{', '.join(self.format_hints)}}}"
        return f"{self.who} {self.kind}{ref}{hints}{text}"


@dataclass(frozen=True, slots=True)
class PromptShown:
    """A ``prompt`` the connector rendered: where, and which options it offers."""

    prompt_id: str
    chat_id: str
    platform: str | None
    gateway_id: str
    message_id: str | None
    question: str
    options: tuple[tuple[str, str], ...]
    """(option id, label) pairs, in order."""

    def label(self, option_id: str) -> str:
        for known, label in self.options:
            if known == option_id:
                return label
        offered = ", ".join(known for known, _ in self.options)
        raise ValueError(
            f"prompt {self.prompt_id!r} has no option {option_id!r} (it offers {offered})"
        )


@dataclass(slots=True)
class Chat:
    chat_id: str
    platform: str | None = None
    gateway_id: str | None = None
    scope_id: str | None = None
    """The tenant of the chat, from its inbound; replies must carry it."""
    source: JsonObject = field(default_factory=dict)
    """The ``source`` of the chat's latest inbound: the template of injected ones."""
    transcript: list[TranscriptEntry] = field(default_factory=list)


def _outbound_text(action: Mapping[str, Any]) -> str | None:
    op = action.get("op")
    if op == "prompt":
        options = " ".join(
            f"[{o.get('id')}: {o.get('label')}]"
            for o in action.get("options", ())
            if isinstance(o, dict)
        )
        return f"{action.get('content')} {options}".strip()
    if op == "send_media":
        caption = action.get("content")
        media = f"{action.get('media_kind')} {action.get('source_url')}"
        return f"{media} {caption}" if caption else media
    if op == "react":
        return f"{'-' if action.get('remove') else '+'}{action.get('emoji')}"
    if op in ("thread_create", "thread_rename"):
        return _text(action.get("thread_name"))
    if op == "task_card":
        return " ".join(
            f"[{c.get('status')}: {c.get('title')}]"
            for c in action.get("chunks", ())
            if isinstance(c, dict)
        )
    return _text(action.get("content"))


class ChatBook:
    """Every chat the connector has seen, by chat id."""

    def __init__(self, *, keep_transcripts: bool = True) -> None:
        self.keep_transcripts = keep_transcripts
        self.chats: dict[str, Chat] = {}
        self.prompts: dict[str, PromptShown] = {}
        self.declined: dict[str, bool] = {}
        """Chats declined on purpose -> whether their declines carry the code."""
        self.auto_threads: set[str] = set()
        """Chats whose sends open a thread of their own (the auto-thread policy)."""

    def chat(self, chat_id: str) -> Chat:
        known = self.chats.get(chat_id)
        if known is None:
            known = self.chats[chat_id] = Chat(chat_id)
        return known

    def latest_prompt(self, chat_id: str) -> PromptShown | None:
        """The prompt shown last in ``chat_id``, if any."""
        for shown in reversed(self.prompts.values()):
            if shown.chat_id == chat_id:
                return shown
        return None

    def transcript(self, chat_id: str) -> list[TranscriptEntry]:
        known = self.chats.get(chat_id)
        return list(known.transcript) if known is not None else []

    def saw_inbound(self, event: Mapping[str, Any], gateway_id: str) -> None:
        """Learn from an inbound event about to be sent to ``gateway_id``."""
        source = event.get("source")
        if not isinstance(source, dict):
            return
        chat_id = _text(source.get("chat_id"))
        if chat_id is None:
            return
        chat = self.chat(chat_id)
        chat.platform = _text(source.get("platform")) or chat.platform
        chat.gateway_id = gateway_id
        scope = _text(source.get("scope_id")) or _text(source.get("guild_id"))
        if scope is not None:
            chat.scope_id = scope
        chat.source = dict(source)
        if not self.keep_transcripts:
            return
        who = (
            _text(source.get("user_name"))
            or _text(source.get("user_display_name"))
            or _text(source.get("user_handle"))
            or _text(source.get("user_id"))
            or "user"
        )
        kind = "prompt_response" if "prompt_response" in event else event.get("message_type")
        chat.transcript.append(
            TranscriptEntry(
                "in",
                kind if isinstance(kind, str) else "text",
                _text(event.get("text")),
                who,
                _text(event.get("message_id")),
                dict(event),
            )
        )

    def stop_pressed(self, chat_id: str, who: str) -> None:
        """Record that ``who`` pressed stop in ``chat_id``."""
        chat = self.chat(chat_id)
        if self.keep_transcripts:
            chat.transcript.append(TranscriptEntry("in", "stop", None, who))

    def carried_out(
        self, action: Mapping[str, Any], result: Mapping[str, Any], gateway_id: str
    ) -> None:
        """Record an op the connector carried out successfully."""
        chat_id = _text(action.get("chat_id"))
        if chat_id is None:
            return
        op = str(action.get("op"))
        message_id = _text(result.get("message_id")) or _text(action.get("message_id"))
        chat = self.chat(chat_id)
        if self.keep_transcripts:
            text = _outbound_text(action)
            kind = "seal" if op == "draft" and action.get("final") is True else op
            metadata = action.get("metadata")
            hints = metadata.get("format_hints") if isinstance(metadata, dict) else None
            entry = TranscriptEntry(
                "out",
                kind,
                text,
                "bot",
                message_id,
                dict(action),
                dict(hints) if isinstance(hints, dict) else None,
            )
            chat.transcript.append(entry)
        if op == "prompt":
            options = tuple(
                (str(o["id"]), str(o["label"])) for o in action["options"] if isinstance(o, dict)
            )
            self.prompts[str(action["prompt_id"])] = PromptShown(
                str(action["prompt_id"]),
                chat_id,
                chat.platform,
                gateway_id,
                _text(result.get("message_id")),
                str(action.get("content", "")),
                options,
            )

    def declined_scope(self, action: Mapping[str, Any]) -> str | None:
        """Why egress of ``action`` to its chat is declined, or ``None``: a chat whose
        inbound named a tenant accepts only replies that name the same one, and a chat
        declined on purpose (`decline`) accepts none. The reason is for the
        connector's own log; the gateway gets the uniform text."""
        chat_id = _text(action.get("chat_id"))
        if chat_id is not None and chat_id in self.declined:
            return f"chat {chat_id!r} is declined on purpose"
        chat = self.chats.get(chat_id) if chat_id is not None else None
        if chat is None or chat.scope_id is None:
            return None
        metadata = action.get("metadata")
        given = metadata.get("scope_id") if isinstance(metadata, dict) else None
        if given is None:
            return (
                f"chat {chat_id!r} belongs to scope {chat.scope_id!r} and the action "
                "carries no metadata.scope_id"
            )
        if _text(given) != chat.scope_id:
            return f"chat {chat_id!r} belongs to scope {chat.scope_id!r}, not {given!r}"
        return None

    def open_thread(self, parent_id: str, thread_id: str) -> None:
        """A thread the connector opened in ``parent_id``: a chat of the same tenant."""
        parent = self.chat(parent_id)
        thread = self.chat(thread_id)
        thread.platform, thread.gateway_id = parent.platform, parent.gateway_id
        thread.scope_id = parent.scope_id
        thread.source = {
            **parent.source,
            "chat_id": thread_id,
            "chat_type": "thread",
            "parent_chat_id": parent_id,
        }

    def decline(self, chat_id: str, *, with_code: bool = True) -> None:
        """Decline every reply to ``chat_id`` from now on (until `allow`)."""
        self.declined[chat_id] = with_code

    def allow(self, chat_id: str) -> None:
        self.declined.pop(chat_id, None)

    def decline_has_code(self, chat_id: str) -> bool:
        """Whether the decline of ``chat_id`` carries the code (a scope's always does)."""
        return self.declined.get(chat_id, True)
