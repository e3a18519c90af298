"""Live cards as the reference connector keeps them (docs/protocol.md, "Live cards").

A gateway streams a reply as ``draft`` frames under one ``draft_id`` and, where the
stream is the message, seals it with ``final: true``. The connector keeps a tombstone
per sealed draft: a repeated seal (a gateway whose first seal's result was lost) gets
the same ``message_id`` and opens no second stream, and a draft after the seal is
refused (``draft_sealed``), so a gateway that sends one shows up in its tests.

Plain data: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DraftBook", "DraftStep"]

JsonObject = dict[str, Any]

DraftStep = Literal["draft", "seal", "repeated_seal", "after_seal"]
"""What a ``draft`` action was to its stream: a new draft, the seal, a seal sent
again, or a draft that came after the seal (refused)."""

TOMBSTONES = 4096
"""Sealed streams remembered (the oldest is forgotten first)."""


@dataclass(slots=True)
class _Stream:
    message_id: str
    content: str = ""
    sealed: bool = False


class DraftBook:
    """Every live card the connector has seen, by (gateway, chat, draft id)."""

    def __init__(self, tombstones: int = TOMBSTONES) -> None:
        """``tombstones``: sealed streams remembered (0: none, a repeated seal opens a
        new stream: a connector that breaks the contract)."""
        self._streams: dict[tuple[str, str, int], _Stream] = {}
        self._tombstones = tombstones

    def apply(
        self, action: Mapping[str, Any], gateway_id: str, new_message_id: Callable[[], str]
    ) -> tuple[JsonObject, DraftStep]:
        """Carry out a valid ``draft`` action; its result, and what it was."""
        key = (gateway_id, str(action["chat_id"]), int(action["draft_id"]))
        stream = self._streams.get(key)
        final = action["final"] is True
        if stream is not None and stream.sealed:
            if final:
                return {"success": True, "message_id": stream.message_id}, "repeated_seal"
            return {
                "success": False,
                "code": "draft_sealed",
                "error": (
                    f"draft {key[2]} of chat {key[1]!r} was already sealed; drafts after "
                    "the seal are ignored, so this one was refused"
                ),
            }, "after_seal"
        if stream is None:
            stream = self._streams[key] = _Stream(new_message_id())
            if len(self._streams) > self._tombstones:
                self._streams.pop(next(iter(self._streams)))
        stream.content = str(action["content"])
        if final:
            stream.sealed = True
            return {"success": True, "message_id": stream.message_id}, "seal"
        return {"success": True}, "draft"
