"""The capabilities of one platform, as the connector describes them (docs/protocol.md,
"Descriptor").

A connector may be newer or sloppier than we are, so only the fields without which a
descriptor means nothing (``platform``, ``contract_version``) are enforced; every other
field falls back to a safe default rather than costing us the platform. Unknown keys stay
reachable through [`Descriptor.raw`][trio_relay.Descriptor.raw].

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .frames import FrameError
from .text import split_text, text_length

__all__ = ["DEFAULT_MAX_MESSAGE_LENGTH", "LEGACY_OPS", "Descriptor", "LenUnit", "shared"]

LEGACY_OPS: frozenset[str] = frozenset({"send", "edit", "typing", "follow_up"})
"""The ops every platform supports; what an empty or missing ``supported_ops`` means."""

DEFAULT_MAX_MESSAGE_LENGTH = 4096

LenUnit = Literal["chars", "utf16"]


def _int_or_none(value: object) -> int | None:
    # bool is an int subclass, but True is not a length or a version.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _flag(obj: dict[str, Any], key: str) -> bool:
    return obj.get(key) is True


def _str_or_none(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _positive_number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value) if value != float("inf") else None
    return None


def _ops(value: object) -> tuple[str, ...]:
    # A bare string is iterable too, but "send" is not the op list ("s", "e", ...).
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(op for op in value if isinstance(op, str))


@dataclass(frozen=True)
class Descriptor:
    """What one platform behind the connector can do.

    Build it with [`from_wire`][trio_relay.Descriptor.from_wire]. ``raw`` is the wire object as
    received, so fields
    this version does not model are still there.
    """

    platform: str
    contract_version: int
    label: str
    max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH
    supports_draft_streaming: bool = False
    supports_edit: bool = False
    supports_threads: bool = False
    markdown_dialect: str = "plain"
    len_unit: LenUnit = "chars"
    emoji: str | None = None
    platform_hint: str | None = None
    pii_safe: bool | None = None
    supported_ops: tuple[str, ...] = ()
    supports_context: bool = False
    """The connector can attach surrounding channel messages (``event.context``)."""
    supports_inchannel_continuable: bool = False
    supports_block_formatting: bool = False
    """The connector renders blocks when a frame's ``metadata.format_hints`` asks."""
    draft_stream_is_message: bool | None = None
    """Whether a ``draft`` stream becomes the message itself (sealed by a final draft)
    rather than a preview followed by a ``send``; ``None`` when the connector did not
    say (see [`stream_is_message`][trio_relay.Descriptor.stream_is_message])."""
    idempotency_window_s: float | None = None
    """Seconds within which the connector carries out an ``idempotency_key`` at most once
    (docs/protocol.md, "Idempotency keys"); ``None`` when it does not advertise the
    extension (a missing, non-numeric or non-positive value)."""
    # Excluded from the hash (a dict has none) and the repr (it repeats the fields).
    raw: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)

    @classmethod
    def from_wire(cls, obj: object) -> Descriptor:
        """Decode a wire descriptor; raises `FrameError` only when it has no
        usable ``platform`` or ``contract_version``."""
        if not isinstance(obj, dict):
            raise FrameError(f"descriptor must be an object, got {type(obj).__name__}")
        platform = obj.get("platform")
        if not isinstance(platform, str) or not platform.strip():
            raise FrameError("descriptor field 'platform' must be a non-empty string")
        version = _int_or_none(obj.get("contract_version"))
        if version is None:
            raise FrameError("descriptor field 'contract_version' must be an integer")
        max_len = _int_or_none(obj.get("max_message_length"))
        label = obj.get("label")
        dialect = obj.get("markdown_dialect")
        len_unit: LenUnit = "utf16" if obj.get("len_unit") == "utf16" else "chars"
        pii_safe = obj.get("pii_safe")
        stream_is_message = obj.get("draft_stream_is_message")
        return cls(
            platform=platform,
            contract_version=version,
            label=label if isinstance(label, str) and label else platform,
            max_message_length=(
                max_len if max_len is not None and max_len > 0 else DEFAULT_MAX_MESSAGE_LENGTH
            ),
            supports_draft_streaming=_flag(obj, "supports_draft_streaming"),
            supports_edit=_flag(obj, "supports_edit"),
            supports_threads=_flag(obj, "supports_threads"),
            markdown_dialect=dialect if isinstance(dialect, str) and dialect else "plain",
            len_unit=len_unit,
            emoji=_str_or_none(obj, "emoji"),
            platform_hint=_str_or_none(obj, "platform_hint"),
            pii_safe=pii_safe if isinstance(pii_safe, bool) else None,
            supported_ops=_ops(obj.get("supported_ops")),
            supports_context=_flag(obj, "supports_context"),
            supports_inchannel_continuable=_flag(obj, "supports_inchannel_continuable"),
            supports_block_formatting=_flag(obj, "supports_block_formatting"),
            draft_stream_is_message=(
                stream_is_message if isinstance(stream_is_message, bool) else None
            ),
            idempotency_window_s=_positive_number(obj.get("idempotency_window_s")),
            raw=dict(obj),
        )

    @property
    def effective_ops(self) -> frozenset[str]:
        """The ops this platform accepts: ``supported_ops``, or `LEGACY_OPS` when
        the connector advertised none."""
        return frozenset(self.supported_ops) if self.supported_ops else LEGACY_OPS

    def supports(self, op: str) -> bool:
        """Whether requests with ``action.op == op`` may be sent to this platform."""
        ops = self.supported_ops  # (the tuple itself: no set built per request)
        return op in ops if ops else op in LEGACY_OPS

    @property
    def live_cards(self) -> bool:
        """Whether replies may stream as ``draft`` frames: ``supports_draft_streaming``
        and ``draft`` listed in ``supported_ops`` (an empty list, the legacy set, does
        not count)."""
        return self.supports_draft_streaming and "draft" in self.supported_ops

    @property
    def stream_is_message(self) -> bool:
        """Whether a draft stream is the message (sealed by a final draft) rather than a
        preview: ``draft_stream_is_message`` when the connector sent it, else true only
        for the platform ``slack``, whose native streams are messages."""
        if self.draft_stream_is_message is not None:
            return self.draft_stream_is_message
        return self.platform.strip().lower() == "slack"

    def text_length(self, text: str) -> int:
        """``text``'s length as this platform counts it (characters, or UTF-16 code
        units when ``len_unit`` is ``utf16``)."""
        return text_length(text, self.len_unit)

    def split_text(self, text: str) -> list[str]:
        """``text`` cut into pieces that each fit ``max_message_length``, at paragraph,
        then line, then word boundaries (see `trio_relay._core.text.split_text`).
        An empty text gives no pieces."""
        return split_text(text, self.max_message_length, self.len_unit)

    def fits(self, text: str) -> bool:
        """Whether ``text`` fits in one message of this platform."""
        return self.text_length(text) <= self.max_message_length


SHARED_DESCRIPTORS = 256
"""Distinct descriptors `shared` keeps (the oldest is forgotten first)."""

_shared: dict[Descriptor, Descriptor] = {}


def shared(descriptor: Descriptor) -> Descriptor:
    """An equal descriptor already in use in this process, else ``descriptor`` itself.

    Every relay of a process that talks to the same connector gets the same descriptors
    on every connection; sharing one immutable copy saves each idle relay the parsed
    wire object (``raw``) and the fields, about 1.7 KB a platform. (``raw`` is a dict:
    it is therefore shared too, and must be treated as read-only, like the rest.)
    """
    known = _shared.setdefault(descriptor, descriptor)
    if known is descriptor and len(_shared) > SHARED_DESCRIPTORS:
        # Bounded: a connector whose descriptors keep changing costs no more than this.
        _shared.pop(next(iter(_shared)), None)
    return known


_by_line: dict[bytes, Descriptor] = {}


def decoded(wire: object, line: bytes = b"") -> Descriptor:
    """``shared(Descriptor.from_wire(wire))``, kept by the wire ``line`` it was read
    from (when given): a connector sends the same line on every connection, and its
    decoding and the lookup in `shared` cost 70,000 CPU instructions, 4 % of a
    redial (callgrind). Raises `FrameError` as ``from_wire`` does (nothing is
    kept then)."""
    if line:
        known = _by_line.get(line)
        if known is not None:
            return known
    descriptor = shared(Descriptor.from_wire(wire))
    if line:
        _by_line[line] = descriptor
        if len(_by_line) > SHARED_DESCRIPTORS:
            _by_line.pop(next(iter(_by_line)), None)
    return descriptor
