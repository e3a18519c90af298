"""The op table of ``outbound`` actions, as a connector checks them (docs/protocol.md,
"Outbound actions").

One row per op: its fields, which are required, what each must hold, and what kind of
result a success carries. `check_action` turns an action into the reason it is
refused (naming the field), or ``None`` when the connector may carry it out. A real
connector refuses a malformed action rather than guess; the reference connector does the
same, so a gateway's bug shows up in its tests and not in production.

Plain data and functions: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._core.contract_shapes import json_kind

__all__ = ["OP_TABLE", "ActionRefusal", "OpSpec", "check_action", "egress_declined"]

ResultKind = Literal["message_id", "plain", "thread_id", "chat_info"]
"""What a successful result carries beside ``success``."""

Check = Callable[[Any], str | None]
"""Returns what is wrong with a value of the right JSON type, or ``None``."""

MEDIA_KINDS = ("image", "voice", "audio", "video", "document")
PROMPT_KINDS = ("approval", "clarify", "choice")
TASK_STATUSES = ("pending", "in_progress", "complete", "error")
MAX_THREAD_NAME = 100
MAX_OPTION_ID = 32
MAX_PROMPT_CALLBACK_BYTES = 64  # "hp1:<prompt_id>:<option_id>" must fit a button's data
_ID_ALPHABET = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: str
    """``string``, ``id`` (string or integer), ``int``, ``bool``, ``number``, ``object``,
    ``list``."""
    required: bool = False
    check: Check | None = None


@dataclass(frozen=True, slots=True)
class OpSpec:
    name: str
    fields: tuple[Field, ...]
    result: ResultKind
    chat_addressed: bool = True
    """Carries a ``chat_id``: routed (and possibly declined) by that chat's tenant."""


@dataclass(frozen=True, slots=True)
class ActionRefusal:
    """Why an action is refused: ``code`` for machines, ``error`` for people. A refusal
    without a code is what an older connector sends: its error text alone."""

    code: str | None
    error: str

    def result(self) -> dict[str, Any]:
        if self.code is None:
            return {"success": False, "error": self.error}
        return {"success": False, "code": self.code, "error": self.error}


def egress_declined(platform: str | None, *, with_code: bool = True) -> ActionRefusal:
    """A decline as the real connector words it (docs/protocol.md, "Egress declines"):
    the same text for every reason, so that it tells a gateway nothing about other
    tenants; ``with_code=False`` sends the text alone, as older connectors do."""
    text = (
        f"{platform or 'relay'} egress declined: target is not an approved destination "
        "for this connection"
    )
    return ActionRefusal("egress_declined" if with_code else None, text)


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def _at_most(limit: int) -> Check:
    def check(value: str) -> str | None:
        return None if len(value) <= limit else f"must be at most {limit} characters"

    return check


def _prompt_id(value: str) -> str | None:
    if not _ID_ALPHABET.fullmatch(value):
        return "must use only the characters A-Z a-z 0-9 _ . -"
    return None


def _options(value: list[Any]) -> str | None:
    if not value:
        return "must list at least one option"
    for n, option in enumerate(value):
        if not isinstance(option, dict):
            return f"[{n}] must be an object with 'id' and 'label'"
        option_id, label = option.get("id"), option.get("label")
        if not isinstance(option_id, str) or not _ID_ALPHABET.fullmatch(option_id):
            return f"[{n}].id must be a string of A-Z a-z 0-9 _ . -"
        if len(option_id) > MAX_OPTION_ID:
            return f"[{n}].id must be at most {MAX_OPTION_ID} characters"
        if not isinstance(label, str):
            return f"[{n}].label must be a string"
        if "style" in option and not isinstance(option["style"], str):
            return f"[{n}].style must be a string"
    return None


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be positive"


def _chunks(value: list[Any]) -> str | None:
    for n, chunk in enumerate(value):
        if not isinstance(chunk, dict):
            return f"[{n}] must be an object with 'id', 'title' and 'status'"
        for key in ("id", "title"):
            if not isinstance(chunk.get(key), str):
                return f"[{n}].{key} must be a string"
        if chunk.get("status") not in TASK_STATUSES:
            return f"[{n}].status must be one of {', '.join(TASK_STATUSES)}"
        if "details" in chunk and not isinstance(chunk["details"], str):
            return f"[{n}].details must be a string"
    return None


_CHAT = Field("chat_id", "id", required=True)
_MESSAGE = Field("message_id", "id", required=True)
_CONTENT = Field("content", "string", required=True)
_METADATA = Field("metadata", "object")
_REPLY_TO = Field("reply_to", "id")


def _op(name: str, result: ResultKind, *fields: Field, chat: bool = True) -> OpSpec:
    return OpSpec(name, fields, result, chat_addressed=chat)


OP_TABLE: Mapping[str, OpSpec] = {
    spec.name: spec
    for spec in (
        _op("send", "message_id", _CHAT, _CONTENT, _REPLY_TO, _METADATA),
        _op("edit", "plain", _CHAT, _MESSAGE, _CONTENT, _METADATA),
        _op("typing", "plain", _CHAT, Field("content", "string"), _METADATA),
        _op(
            "follow_up",
            "message_id",
            Field("session_key", "string", required=True),
            Field("kind", "string", required=True),
            _CONTENT,
            _METADATA,
            chat=False,
        ),
        _op(
            "send_media",
            "message_id",
            _CHAT,
            Field("media_kind", "string", required=True, check=_one_of(MEDIA_KINDS)),
            Field("source_url", "string", required=True),
            Field("content", "string"),
            Field("filename", "string"),
            _REPLY_TO,
            _METADATA,
        ),
        _op(
            "prompt",
            "message_id",
            _CHAT,
            Field("prompt_kind", "string", required=True, check=_one_of(PROMPT_KINDS)),
            Field("prompt_id", "string", required=True, check=_prompt_id),
            _CONTENT,
            Field("options", "list", required=True, check=_options),
            Field("timeout_s", "number", check=_positive),
            _REPLY_TO,
            _METADATA,
        ),
        _op(
            "react",
            "plain",
            _CHAT,
            _MESSAGE,
            Field("emoji", "string", required=True),
            Field("remove", "bool"),
            _METADATA,
        ),
        _op("delete", "plain", _CHAT, _MESSAGE, _METADATA),
        _op(
            "thread_create",
            "thread_id",
            _CHAT,
            Field("thread_name", "string", required=True, check=_at_most(MAX_THREAD_NAME)),
            Field("message_id", "id"),
            _METADATA,
        ),
        _op(
            "thread_rename",
            "plain",
            _CHAT,
            _MESSAGE,
            Field("thread_name", "string", required=True, check=_at_most(MAX_THREAD_NAME)),
            Field("only_if_current_name", "string"),
            _METADATA,
        ),
        _op("get_chat_info", "chat_info", _CHAT),
        _op(
            "draft",
            "message_id",
            _CHAT,
            Field("draft_id", "int", required=True, check=_positive),
            _CONTENT,
            Field("final", "bool", required=True),
            _METADATA,
        ),
        _op(
            "task_card",
            "plain",
            _CHAT,
            Field("card_id", "string", required=True),
            Field("chunks", "list", required=True, check=_chunks),
            _METADATA,
        ),
        _op("task_card_stop", "plain", _CHAT, Field("card_id", "string", required=True), _METADATA),
    )
}
"""Every op of protocol v1, by name."""


_KINDS: Mapping[str, tuple[str, Callable[[Any], bool]]] = {
    "string": ("a string", lambda v: isinstance(v, str)),
    # Numeric ids (Telegram chats, for one) are ids too; a boolean is not.
    "id": (
        "a string or an integer",
        lambda v: isinstance(v, (str, int)) and not isinstance(v, bool),
    ),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "bool": ("a boolean", lambda v: isinstance(v, bool)),
    "number": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
}


def _check_field(op: str, spec: Field, action: Mapping[str, Any]) -> str | None:
    if spec.name not in action or action[spec.name] is None:
        if spec.required:
            return f"invalid action: {op!r} needs field {spec.name!r}"
        return None
    value = action[spec.name]
    wanted, matches = _KINDS[spec.kind]
    if not matches(value):
        return (
            f"invalid action: field {spec.name!r} of {op!r} must be {wanted}, "
            f"got {json_kind(value, integer='a number')}"
        )
    problem = spec.check(value) if spec.check is not None else None
    if problem is not None:
        return f"invalid action: field {spec.name!r} of {op!r} {problem}"
    return None


def _prompt_fits(action: Mapping[str, Any]) -> str | None:
    # The press comes back through the platform's button payload, which is small.
    prompt_id = action["prompt_id"]
    for option in action["options"]:
        callback = f"hp1:{prompt_id}:{option['id']}"
        if len(callback.encode()) > MAX_PROMPT_CALLBACK_BYTES:
            return (
                f"invalid action: field 'prompt_id' of 'prompt' is too long: "
                f"{callback!r} exceeds {MAX_PROMPT_CALLBACK_BYTES} bytes"
            )
    return None


def check_action(action: Mapping[str, Any], supported_ops: frozenset[str]) -> ActionRefusal | None:
    """Why ``action`` must be refused by a platform that supports ``supported_ops``, or
    ``None`` when it is well formed and supported. Unknown fields are ignored (a newer
    gateway may send more), as the protocol asks of every reader."""
    op = action.get("op")
    if not isinstance(op, str):
        return ActionRefusal("invalid_action", "invalid action: field 'op' must be a string")
    spec = OP_TABLE.get(op)
    if spec is None:
        return ActionRefusal("unknown_op", f"unknown op {op!r}: protocol v1 has no such op")
    if op not in supported_ops:
        listed = ", ".join(sorted(supported_ops))
        return ActionRefusal(
            "unsupported_op",
            f"op {op!r} is not in this platform's supported_ops ({listed})",
        )
    for field in spec.fields:
        problem = _check_field(op, field, action)
        if problem is not None:
            return ActionRefusal("invalid_action", problem)
    if op == "prompt":
        problem = _prompt_fits(action)
        if problem is not None:
            return ActionRefusal("invalid_action", problem)
    return None
