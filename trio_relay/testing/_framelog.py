"""One readable line per frame, for people watching a connector at work.

``trio-relay connector`` prints every frame it receives (``<-``) and sends (``->``)
through `describe`: the frame type, then what a person wants to know about it
(the op and chat of a request, the outcome of a result, who wrote what in an inbound)
instead of the raw JSON. Plain functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.frames import (
    DescriptorFrame,
    Frame,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)

MAX_TEXT = 80


def quote(text: object, limit: int = MAX_TEXT) -> str:
    """``text`` in double quotes on one line, cut at ``limit`` characters."""
    flat = " ".join(str(text).split("\n"))
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return '"' + flat.replace('"', '\\"') + '"'


_ID_KEYS = (
    "chat_id",
    "session_key",
    "message_id",
    "prompt_id",
    "media_kind",
    "draft_id",
    "card_id",
)


def _action(action: Mapping[str, Any]) -> str:
    parts = [str(action.get("op"))]
    for key in _ID_KEYS:
        if key in action:
            parts.append(f"{key}={action[key]}")
    if "idempotency_key" in action:
        parts.append("keyed")  # (the key itself is not for logs)
    if action.get("final") is True:
        parts.append("final")  # a live card's seal
    if isinstance(action.get("chunks"), list):
        parts.append(f"chunks={len(action['chunks'])}")
    if isinstance(action.get("options"), list):
        ids = ",".join(str(o.get("id")) for o in action["options"] if isinstance(o, dict))
        parts.append(f"options={ids}")
    for key in ("content", "thread_name", "emoji"):
        if isinstance(action.get(key), str):
            parts.append(quote(action[key]))
    metadata = action.get("metadata")
    if isinstance(metadata, dict) and metadata:
        parts.append("metadata{" + ", ".join(f"{k}={v}" for k, v in metadata.items()) + "}")
    return " ".join(parts)


def _result(result: Mapping[str, Any]) -> str:
    if result.get("success") is True:
        extra = [f"{k}={v}" for k, v in result.items() if k != "success"]
        return " ".join(["ok", *extra])
    code = result.get("code")
    error = result.get("error")
    return " ".join(
        part
        for part in ("FAILED", str(code) if code else "", quote(error) if error else "")
        if part
    )


def _event(event: Mapping[str, Any]) -> str:
    source = event.get("source")
    source = source if isinstance(source, dict) else {}
    who = source.get("user_name") or source.get("user_id") or "?"
    where = f"{source.get('platform', '?')}:{source.get('chat_id', '?')}"
    press = event.get("prompt_response")
    if isinstance(press, dict):
        return f"{where} {who} pressed {press.get('option_id')} on {press.get('prompt_id')}"
    return f"{where} {who}: {quote(event.get('text', ''))}"


def describe(frame: Frame) -> str:
    """One line for ``frame``, starting with its wire type."""
    if isinstance(frame, Hello):
        return f"hello {frame.platform} bot={frame.bot_id or '-'}"
    if isinstance(frame, DescriptorFrame):
        d = frame.descriptor
        ops = d.get("supported_ops") or ["legacy"]
        window = d.get("idempotency_window_s")
        return (
            f"descriptor {d.get('platform')} max={d.get('max_message_length')} "
            f"{d.get('len_unit')} ops={','.join(map(str, ops))}"
            + (f" idempotency={window:g}s" if isinstance(window, (int, float)) else "")
        )
    if isinstance(frame, Outbound):
        route = f" [{frame.platform}]" if frame.platform else ""
        return f"outbound {frame.request_id}{route} {_action(frame.action)}"
    if isinstance(frame, OutboundResult):
        return f"outbound_result {frame.request_id} {_result(frame.result)}"
    if isinstance(frame, InboundFrame):
        buffered = f" {frame.buffer_id}" if frame.buffer_id is not None else " live"
        return f"inbound{buffered} {_event(frame.event)}"
    if isinstance(frame, InboundAck):
        return f"inbound_ack {frame.buffer_id}"
    if isinstance(frame, Interrupt):
        return f"interrupt {frame.session_key} reason={frame.reason}"
    if isinstance(frame, InterruptInbound):
        return f"interrupt_inbound {frame.session_key} chat={frame.chat_id}"
    if isinstance(frame, PassthroughFrame):
        f = frame.forward
        buffered = f" {frame.buffer_id}" if frame.buffer_id is not None else " live"
        return (
            f"passthrough_forward{buffered} {f.get('platform')} {f.get('method')} {f.get('path')}"
        )
    return frame.TYPE
