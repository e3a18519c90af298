"""The decline latch: chats whose egress the connector declined, answered at once until
they speak again (docs/protocol.md, "Egress declines").

A connector declines a reply to a chat that is not an approved destination for this
connection, and logs every refusal. An agent that keeps replying into such a chat (a
stream's edits, the pieces of a long text, the next turn's answer) would be refused
again and again. So after a definite decline of a content op the relay *latches* the
chat: its further content requests are answered here, with the decline, and no frame
leaves, until an inbound message of that chat is handed to the handler (the user spoke
there again, so the connector may route it now). Typing and delete are not content:
they are neither latched nor do they lift a latch, and ``follow_up`` names no chat.

Chats are keyed by their id as a string (a numeric id and its text are one chat), never
split on ``:``: Matrix room ids contain colons. A thread the connector opened for a
reply (a ``send`` result's ``thread_id``) belongs to its chat's latch; a thread a user
made is a chat of its own.

`DeclineLatch` is one mechanism for the relay's one send point: `refusal` is asked
before a request is sent, `settled` is told how it ended, `admitted` hears of the
inbound that lifts a latch. Sans-I/O: no Trio, no sockets, no logging (the caller logs
the one warning a latch gets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .outcome import EGRESS_DECLINED, Outcome

__all__ = ["CONTENT_OPS", "DeclineLatch", "chat_key"]

CONTENT_OPS = frozenset({"send", "edit", "draft", "prompt", "send_media", "task_card"})
"""The ops that put content in a chat: a decline of one latches the chat, and a latched
chat gets none of them."""


def chat_key(chat_id: object) -> str | None:
    """The latch's key of a chat id: the id as a string (ids are strings on most
    platforms, integers on some), ``None`` for anything else."""
    if isinstance(chat_id, str):
        return chat_id or None
    if isinstance(chat_id, int) and not isinstance(chat_id, bool):
        return str(chat_id)
    return None


class DeclineLatch:
    """The latched chats of one relay, at most ``size`` of them (the oldest latch is
    lifted first past that; its chat's next decline latches it again)."""

    # No __dict__: one per relay.
    __slots__ = ("_threads", "chats", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"latch size must be at least 1, got {size!r}")
        self.size = size
        self.chats: dict[str, str] = {}
        """Latched chat -> the error of the decline that latched it, oldest first. Empty
        on every relay that was never declined: the send point checks it first."""
        self._threads: dict[str, str] | None = None
        """Thread the connector opened -> its chat; made by the first such result."""

    def __bool__(self) -> bool:
        return bool(self.chats)

    def latched_as(self, chat_id: object) -> str | None:
        """The latched chat that ``chat_id`` is, or belongs to (a thread the connector
        opened in it); ``None`` when it is not latched."""
        key = chat_key(chat_id)
        if key is None:
            return None
        if key in self.chats:
            return key
        parent = self._threads.get(key) if self._threads is not None else None
        return parent if parent is not None and parent in self.chats else None

    def refusal(self, action: Mapping[str, Any]) -> Outcome | None:
        """The outcome of ``action`` when its chat is latched and it is content, else
        ``None`` (it may be sent)."""
        if action.get("op") not in CONTENT_OPS:
            return None
        chat_id = action.get("chat_id")
        latched = self.latched_as(chat_id)
        if latched is None:
            return None
        return latched_outcome(str(chat_id), latched, self.chats[latched])

    def settled(self, action: Mapping[str, Any], outcome: Outcome) -> str | None:
        """Learn from how ``action`` ended: a send's new thread belongs to its chat, and
        a definite decline of content latches the chat. Returns the chat latched now,
        ``None`` when none was (not a decline, or latched already)."""
        op = action.get("op")
        if op not in CONTENT_OPS:
            return None
        key = chat_key(action.get("chat_id"))
        if key is None:
            return None
        if outcome.success:
            if op == "send":
                self._record_thread(key, outcome.result.get("thread_id"))
            return None
        if not outcome.egress_declined:
            return None
        chat = self.latched_as(key)
        if chat is not None:
            return None  # latched already (two requests in flight, both declined)
        chat = self._parent_of(key) or key
        self.chats[chat] = outcome.error or EGRESS_DECLINED
        if len(self.chats) > self.size:
            del self.chats[next(iter(self.chats))]
        return chat

    def admitted(self, chat_id: object) -> str | None:
        """An inbound message of ``chat_id`` was handed to the handler: lift the latch
        of that chat (or of the chat whose connector-made thread it is). Returns the
        chat whose latch was lifted, if one was."""
        key = chat_key(chat_id)
        if key is None or not self.chats:
            return None
        chat = key if key in self.chats else self._parent_of(key)
        if chat is None or chat not in self.chats:
            return None
        del self.chats[chat]
        return chat

    def _parent_of(self, key: str) -> str | None:
        return self._threads.get(key) if self._threads is not None else None

    def _record_thread(self, chat: str, thread_id: object) -> None:
        thread = chat_key(thread_id)
        if thread is None or thread == chat:
            return
        threads = self._threads
        if threads is None:
            threads = self._threads = {}
        # A thread of a thread is its top chat's: one latch for the whole tree.
        threads[thread] = threads.get(chat, chat)
        if len(threads) > self.size:
            del threads[next(iter(threads))]


def latched_outcome(chat_id: str, latched: str, decline: str) -> Outcome:
    """The answer to a content request for a latched chat: nothing was sent."""
    where = f"chat {chat_id!r}" if chat_id == latched else (
        f"thread {chat_id!r} (opened by the connector in chat {latched!r})"
    )
    return Outcome.definite(
        EGRESS_DECLINED,
        f"{where} is latched: the connector declined egress to chat {latched!r} "
        f"({decline}), so nothing was sent. The latch lifts when an inbound message of "
        "that chat is handled; RelayConfig(latch_declines=False) turns latching off",
    )
