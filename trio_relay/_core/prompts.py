"""Prompts: questions with options that a user answers with a press (docs/protocol.md,
"Prompts").

The gateway mints each ``prompt_id`` as ``<per-process nonce>.<8 hex>``. A connector
fans a press out to every live gateway of the tenant, so the nonce is how a gateway
tells its own prompts from a sibling's: a press for a prompt id with another nonce is
dropped, never shown to the chat handler as the ``/option`` text it also carries. The
alphabet (``[A-Za-z0-9_.-]``) and lengths keep ``hp1:<prompt_id>:<option_id>`` within
the 64 bytes of a platform's button payload.

Where a platform has no native prompt, the question goes out as numbered text and a
reply that names an option (its number, id or label) answers it.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .event import Source

__all__ = [
    "MAX_OPTION_ID",
    "PromptAnswer",
    "PromptKind",
    "PromptOption",
    "fallback_text",
    "match_reply",
    "mint_prompt_id",
    "normalize_options",
    "prompt_action",
]

PromptKind = Literal["approval", "clarify", "choice"]
PROMPT_KINDS = frozenset({"approval", "clarify", "choice"})

MAX_OPTION_ID = 32
_ALPHABET = re.compile(r"[A-Za-z0-9_.-]+")
_BUTTON_PAYLOAD_BYTES = 64


@dataclass(frozen=True, slots=True)
class PromptOption:
    """One answer a prompt offers: ``id`` goes on the wire, ``label`` on the button."""

    id: str
    label: str
    style: str | None = None

    def to_wire(self) -> dict[str, str]:
        wire = {"id": self.id, "label": self.label}
        if self.style is not None:
            wire["style"] = self.style
        return wire


@dataclass(frozen=True)
class PromptAnswer:
    """The answer to [`Relay.ask`][trio_relay.Relay.ask]: which option, and who chose it
    (``source`` of
    the press or the reply, so ``source.user_id`` is the clicking user)."""

    prompt_id: str
    option_id: str
    label: str
    source: Source
    via: Literal["button", "text"] = "button"
    """``button`` for a native press, ``text`` for a reply to the numbered fallback."""


OptionSpec = str | tuple[str, str] | tuple[str, str, str] | PromptOption | dict[str, Any]


def normalize_options(options: Iterable[OptionSpec]) -> tuple[PromptOption, ...]:
    """Options from the forms [`Relay.ask`][trio_relay.Relay.ask] accepts: ``(id, label)`` or
    ``(id, label, style)`` tuples, ``{"id", "label", "style"?}`` dicts,
    [`PromptOption`][trio_relay.PromptOption], or a bare label (its id is then its position,
    ``"1"``, ...).

    Raises ``ValueError`` for no options, a duplicate id, or an id outside
    ``[A-Za-z0-9_.-]`` or longer than 32 characters (it rides in a button payload)."""
    result: list[PromptOption] = []
    for index, spec in enumerate(options, start=1):
        option = _option(spec, index)
        if not _ALPHABET.fullmatch(option.id) or len(option.id) > MAX_OPTION_ID:
            raise ValueError(
                f"option id {option.id!r} must be 1-{MAX_OPTION_ID} characters of "
                "[A-Za-z0-9_.-] (it travels in the platform's button payload)"
            )
        if not option.label:
            raise ValueError(f"option {option.id!r} needs a non-empty label")
        if any(o.id == option.id for o in result):
            raise ValueError(f"option id {option.id!r} is used twice")
        result.append(option)
    if not result:
        raise ValueError("a prompt needs at least one option")
    return tuple(result)


def _option(spec: OptionSpec, index: int) -> PromptOption:
    if isinstance(spec, PromptOption):
        return spec
    if isinstance(spec, str):
        return PromptOption(str(index), spec)
    if isinstance(spec, dict):
        style = spec.get("style")
        return PromptOption(
            str(spec.get("id", "")),
            str(spec.get("label", "")),
            style if isinstance(style, str) else None,
        )
    if isinstance(spec, tuple) and len(spec) in (2, 3):
        return PromptOption(*(str(part) for part in spec))
    raise TypeError(
        f"an option is a label, an (id, label) tuple, a dict or a PromptOption; got {spec!r}"
    )


def mint_prompt_id(nonce: str, token: str) -> str:
    """``<nonce>.<token>``, checked against the contract's alphabet and the button
    payload budget (``hp1:<prompt_id>:<32-char option id>`` within 64 bytes)."""
    prompt_id = f"{nonce}.{token}"
    if not _ALPHABET.fullmatch(prompt_id):
        raise ValueError(f"prompt id {prompt_id!r} is outside [A-Za-z0-9_.-]")
    if len(f"hp1:{prompt_id}:") + MAX_OPTION_ID > _BUTTON_PAYLOAD_BYTES:
        raise ValueError(f"prompt id {prompt_id!r} is too long for a button payload")
    return prompt_id


def is_own(prompt_id: str, nonce: str) -> bool:
    """Whether ``prompt_id`` was minted with this process's ``nonce``."""
    return prompt_id.startswith(nonce + ".")


def prompt_action(
    chat_id: str,
    prompt_id: str,
    question: str,
    options: Sequence[PromptOption],
    kind: str,
    timeout: float | None,
    reply_to: str | None,
) -> dict[str, Any]:
    """The ``prompt`` action (op table: chat_id, prompt_kind, prompt_id, content,
    options, timeout_s?, reply_to?)."""
    if kind not in PROMPT_KINDS:
        raise ValueError(f"prompt kind must be one of {sorted(PROMPT_KINDS)}, got {kind!r}")
    action: dict[str, Any] = {
        "op": "prompt",
        "chat_id": chat_id,
        "prompt_kind": kind,
        "prompt_id": prompt_id,
        "content": question,
        "options": [option.to_wire() for option in options],
    }
    if timeout is not None:
        # Advisory: the connector may expire its buttons; the expiry that counts is ours.
        action["timeout_s"] = max(1, round(timeout))
    if reply_to is not None:
        action["reply_to"] = reply_to
    return action


def fallback_text(question: str, options: Sequence[PromptOption]) -> str:
    """The question as numbered text for platforms without native prompts."""
    lines = [question, ""]
    lines += [f"{number}. {option.label}" for number, option in enumerate(options, start=1)]
    lines += ["", "Reply with the number of your choice."]
    return "\n".join(lines)


def match_reply(text: str, options: Sequence[PromptOption]) -> PromptOption | None:
    """The option a text reply names: its number in the list, its id (``yes`` or
    ``/yes``, as a press renders to old gateways) or its label, ignoring case, spaces
    and a trailing full stop. ``None`` for any other text."""
    answer = text.strip().rstrip(".").strip().casefold()
    if not answer:
        return None
    if answer.isdigit():
        number = int(answer)
        return options[number - 1] if 1 <= number <= len(options) else None
    bare = answer.removeprefix("/")
    for option in options:
        if bare == option.id.casefold() or answer == option.label.strip().casefold():
            return option
    return None
