"""The lenient readers of an inbound event's wire fields (docs/protocol.md, "Inbound
event"): the one place that says what a field of the wrong type reads as.

An inbound event is a user's message, and losing it because one field has an
unexpected type would be worse than reading that field as absent. So each reader
returns a default for anything it does not accept, and numeric ids (Telegram, Discord)
become strings, so that one id has one spelling. The decoders of the event
(``event.py``) and of its enrichments (``enrichments.py``) both read through these;
neither reaches into the other for them.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from typing import Any

__all__ = ["choice", "first_text", "flag", "text", "wire_id"]


def wire_id(value: object) -> str | None:
    """An id from the wire: ids are opaque strings, and a numeric id is the same id
    (``True`` or ``1.5`` are not ids)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def text(obj: dict[str, Any], key: str) -> str | None:
    """``obj[key]`` when it is a string, else ``None``."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def first_text(obj: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` whose value is a non-empty string (``user_name``, else
    ``user_display_name``, ...)."""
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def flag(obj: dict[str, Any], key: str) -> bool | None:
    """``obj[key]`` when it is a JSON boolean, else ``None``: strict, never truthiness
    (a control that trusted ``"false"`` or ``0`` would be fooled)."""
    value = obj.get(key)
    return value if isinstance(value, bool) else None


def choice(value: object, allowed: frozenset[str], default: str) -> str:
    """``value`` when it is one of ``allowed``, else ``default``."""
    # isinstance first: ``[] in frozenset()`` raises TypeError (unhashable).
    return value if isinstance(value, str) and value in allowed else default
