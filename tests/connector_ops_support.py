"""Actions and requests for tests of the reference connector's op table: a minimal
valid action of every op, one with fields changed or dropped, and one request answered.

Shared by ``test_connector_ops.py`` (the table, on the wire) and
``test_connector_chats.py`` (tenants, users, prompts, transcripts)."""

from __future__ import annotations

from typing import Any

from connector_support import Peer, line

MINIMAL: dict[str, dict[str, Any]] = {
    "send": {"chat_id": "C1", "content": "hi"},
    "edit": {"chat_id": "C1", "message_id": "m1", "content": "hi"},
    "typing": {"chat_id": "C1"},
    "follow_up": {"session_key": "s", "kind": "discord.interaction_token", "content": "x"},
    "send_media": {"chat_id": "C1", "media_kind": "image", "source_url": "http://x/1"},
    "prompt": {
        "chat_id": "C1",
        "prompt_kind": "approval",
        "prompt_id": "n0nce.0a1b2c3d",
        "content": "Deploy?",
        "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
    },
    "react": {"chat_id": "C1", "message_id": "m1", "emoji": "+1"},
    "delete": {"chat_id": "C1", "message_id": "m1"},
    "thread_create": {"chat_id": "C1", "thread_name": "topic"},
    "thread_rename": {"chat_id": "C1", "message_id": "T1", "thread_name": "topic 2"},
    "get_chat_info": {"chat_id": "C1"},
    "draft": {"chat_id": "C1", "draft_id": 1, "content": "hi", "final": False},
    "task_card": {
        "chat_id": "C1",
        "card_id": "turn:M1",
        "chunks": [{"id": "t1", "title": "Search", "status": "pending"}],
    },
    "task_card_stop": {"chat_id": "C1", "card_id": "turn:M1"},
}

DROP = object()
"""A field value that :func:`action` leaves out (to test a missing field)."""


def action(op: str, **changes: Any) -> dict[str, Any]:
    """The minimal action of ``op`` with ``changes`` applied (``DROP`` removes a field)."""
    fields = {**MINIMAL[op], **changes}
    return {"op": op, **{k: v for k, v in fields.items() if v is not DROP}}


async def request(peer: Peer, request_id: str, act: dict[str, Any], **envelope: Any) -> Any:
    await peer.send(line({"type": "outbound", "requestId": request_id, "action": act, **envelope}))
    frame = await peer.frame()
    assert frame["type"] == "outbound_result" and frame["requestId"] == request_id
    return frame["result"]


GUILD_EVENT = {
    "text": "hi bot",
    "message_id": "M1",
    "source": {"platform": "discord", "chat_id": "D1", "scope_id": "G1", "user_id": "U1"},
}
"""An inbound event in a guild chat (scope G1): replies to D1 then need that scope."""
