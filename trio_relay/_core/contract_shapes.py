"""What a descriptor and an ``outbound_result`` must look like, as a connector's checker
reads them (docs/protocol.md, "Descriptor" and "Outbound actions").

The gateway itself is lenient: a descriptor field of the wrong type falls back to a safe
default (``_core/descriptor.py``), a missing result reads as ``{}``. A checker of
connectors is strict instead, and says which field is wrong and what it should be, so
each function here returns the list of problems (empty: the shape conforms).

Sans-I/O: plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["REQUIRED_DESCRIPTOR_FIELDS", "descriptor_problems", "json_kind", "result_problems"]

REQUIRED_DESCRIPTOR_FIELDS: Mapping[str, str] = {
    "contract_version": "int",
    "platform": "string",
    "label": "string",
    "max_message_length": "int",
    "supports_draft_streaming": "bool",
    "supports_edit": "bool",
    "supports_threads": "bool",
    "markdown_dialect": "string",
    "len_unit": "string",
}
"""docs/protocol.md, "Descriptor": the required fields and their JSON types."""

_OPTIONAL_FLAGS = (
    "supports_context",
    "supports_inchannel_continuable",
    "supports_block_formatting",
    "draft_stream_is_message",
)
LEN_UNITS = ("chars", "utf16")
CONTRACT_VERSION = 1

_WANTED = {"int": "an integer", "string": "a string", "bool": "a boolean"}


def json_kind(value: Any, *, integer: str = "an integer") -> str:
    """``value``'s JSON type in words, for a report (``a string``, ``null``); ``integer``
    is the word for an integer (the reference connector says ``a number``, as JSON does)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return integer
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def descriptor_problems(descriptor: Any, platform: str) -> list[str]:
    """What is wrong with the descriptor answering the hello for ``platform``."""
    if not isinstance(descriptor, dict):
        return [f"the descriptor is {json_kind(descriptor)}, not an object"]
    problems: list[str] = []
    for name, kind in REQUIRED_DESCRIPTOR_FIELDS.items():
        if name not in descriptor:
            problems.append(f"{name!r} is missing")
        elif not _is(kind, descriptor[name]):
            got = json_kind(descriptor[name])
            problems.append(f"{name!r} is {got}, not {_WANTED[kind]}")
    if problems:
        return problems
    if descriptor["platform"] != platform:
        problems.append(f"'platform' is {descriptor['platform']!r}, not the hello's {platform!r}")
    if descriptor["contract_version"] != CONTRACT_VERSION:
        problems.append(
            f"'contract_version' is {descriptor['contract_version']}, not {CONTRACT_VERSION}"
        )
    if descriptor["len_unit"] not in LEN_UNITS:
        problems.append(f"'len_unit' is {descriptor['len_unit']!r}, not 'chars' or 'utf16'")
    for name in _OPTIONAL_FLAGS:
        if name in descriptor and not isinstance(descriptor[name], bool):
            problems.append(f"{name!r} is {json_kind(descriptor[name])}, not a boolean")
    ops = descriptor.get("supported_ops")
    if ops is not None and not (isinstance(ops, list) and all(isinstance(o, str) for o in ops)):
        problems.append("'supported_ops' is not a list of op names")
    return problems


def result_problems(op: str, result: Any, *, seal: bool = False) -> list[str]:
    """What is wrong with the ``result`` of an ``op`` action (``seal``: a final
    ``draft``, whose success must carry the message's ``message_id``)."""
    if not isinstance(result, dict):
        return [f"the result is {json_kind(result)}, not an object"]
    if "success" not in result:
        return ["'success' is missing"]
    success = result["success"]
    if not isinstance(success, bool):
        return [f"'success' is {json_kind(success)}, not a boolean"]
    problems: list[str] = []
    for name in ("error", "code"):
        if name in result and result[name] is not None and not isinstance(result[name], str):
            problems.append(f"{name!r} is {json_kind(result[name])}, not a string")
    for name in ("message_id", "thread_id"):
        if name in result and result[name] is not None and not _is_id(result[name]):
            problems.append(f"{name!r} is {json_kind(result[name])}, not an id")
    if not success:
        return problems
    if op == "get_chat_info":
        info = result.get("chat_info")
        if not isinstance(info, dict):
            problems.append(f"'chat_info' is {json_kind(info)}, not an object {{name, type}}")
        else:
            for name in ("name", "type"):
                if not isinstance(info.get(name), str):
                    problems.append(f"'chat_info.{name}' is {json_kind(info.get(name))}")
    if seal and result.get("message_id") is None:
        problems.append("a successful seal has no 'message_id'")
    return problems
