"""Newline-delimited JSON over WebSocket messages (docs/protocol.md, "Transport").

`FrameDecoder` is fed the payload of each WebSocket message and returns the
frames it completed. A message may carry several frames or part of one, so the decoder
keeps a trailing partial line between calls. Anything malformed becomes a
`RejectedFrame` in the output, in stream order, and never an exception: one bad
line must not cost the frames around it, nor the connection.

`encode_frame` serialises one frame to a line. `pack_lines` packs lines into
as few messages as a size limit allows, for peers that batch plainly; the relay's own
writer (``_outbox.py``) also caps frames per message and tracks each frame's fate, so it
keeps its own loop.

Sans-I/O: no Trio, no sockets.

**Speedups.** With the optional ``speedups`` extra (``msgspec``) installed, decoding a
line and encoding a frame go through msgspec's C codec first, chosen once at import
(``TRIO_RELAY_PURE_JSON=1`` in the environment keeps the standard library's). The
behaviour is the same either way, byte for byte: the C path takes only what it handles
exactly as the standard library does, and hands everything else to the pure path —
a line it refuses (NaN, ``Infinity``, a lone ``\ud800`` escape, ``1e400``, invalid
UTF-8, anything malformed) is decoded again by the pure path, for the same frame or the
same rejection with the same reason; a line with 512 or more brackets (its nesting could
reach the recursion limit, where the two parsers stop a few levels apart) never takes
it; a value to encode takes it only if it is made of exact ``dict`` (``str`` keys),
``list``, ``tuple``, ``str``, ``int``, ``bool`` and ``None`` (no float: msgspec spells
some exponents differently, ``1e-7`` for ``1e-07``; no subclass, no ``Enum``, ``UUID``
or ``bytes``, which msgspec would encode and the standard library refuses).

**Results.** A plain success in the connector's usual spelling is read by its bytes,
without decoding (`FrameDecoder.feed_with_success_ids`, which hands the protocol
its request id alone): about half a full decode's cost, for the same meaning. Any other
line takes the full path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .frames import DescriptorFrame, Frame, FrameError, OutboundResult, outbound_result

SAMPLE_CHARS = 80
DEFAULT_MAX_LINE_BYTES = 1 << 20


# --- the optional C codec (the ``speedups`` extra) --------------------------------------

PURE_JSON_ENV = "TRIO_RELAY_PURE_JSON"
"""Set to ``1`` to keep the standard library's codec even with msgspec installed."""

MAX_FAST_BRACKETS = 512
"""A line with this many ``[`` and ``{`` or more is decoded by the pure path only. Both
parsers count each level of nesting against the recursion limit, each from its own
call depth (equal today: one Python frame each); a line that could nest that deep never
reaches msgspec, so a change of either call path cannot make them stop apart. Below it
both go far deeper than such a line can."""

_MAX_FAST_DEPTH = 32
"""Deeper values are encoded by the pure path (which also names a circular one)."""

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class JsonCodec:
    """How lines are decoded and frames encoded: the pure path alone (`PURE`), or
    a C fast path in front of it (`msgspec_codec`). ``loads`` returns the value or
    ``_MISSING``; ``dumps`` the bytes or None; either way "not mine" sends the input
    to the pure path, whose answer is then the answer."""

    name: str
    loads: Callable[[bytes], Any] | None = None
    dumps: Callable[[Any], bytes | None] | None = None


PURE = JsonCodec("json")


def _plain(obj: Any, depth: int = 0) -> bool:
    """True if ``obj`` is exact JSON that msgspec encodes byte for byte as we do."""
    kind = type(obj)
    if kind is dict:
        if depth > _MAX_FAST_DEPTH:
            return False
        for key, value in obj.items():
            if type(key) is not str:
                return False
            kind = type(value)
            if not (kind is str or kind is int or kind is bool or value is None) and not _plain(
                value, depth + 1
            ):
                return False
        return True
    if kind is list or kind is tuple:
        if depth > _MAX_FAST_DEPTH:
            return False
        for value in obj:
            kind = type(value)
            if not (kind is str or kind is int or kind is bool or value is None) and not _plain(
                value, depth + 1
            ):
                return False
        return True
    return kind is str or kind is int or kind is bool or obj is None


def msgspec_codec() -> JsonCodec | None:
    """The msgspec fast path in front of the pure one; None without msgspec."""
    try:
        import msgspec
    except ImportError:
        return None
    decode = msgspec.json.Decoder().decode
    encode = msgspec.json.Encoder().encode

    def loads(line: bytes) -> Any:
        # Anything msgspec refuses is decoded again by the pure path, which gives the
        # standard library's answer (a value, or the exact rejection).
        if line.count(b"[") + line.count(b"{") >= MAX_FAST_BRACKETS:
            return _MISSING
        try:
            return decode(line)
        except Exception:
            return _MISSING

    def dumps(obj: Any) -> bytes | None:
        if not _plain(obj):
            return None
        try:
            return encode(obj)
        except Exception:  # a lone surrogate (not UTF-8); an int msgspec cannot carry
            return None

    return JsonCodec("msgspec", loads, dumps)


def _chosen() -> JsonCodec:
    if os.environ.get(PURE_JSON_ENV) == "1":
        return PURE
    return msgspec_codec() or PURE


ACTIVE: JsonCodec = _chosen()
"""The codec of this process (chosen once, at import)."""
JSON_CODEC = ACTIVE.name
"""``"msgspec"`` or ``"json"``: which codec `ACTIVE` is."""


@dataclass(frozen=True, slots=True)
class RejectedFrame:
    """A line the decoder could not turn into a frame: why, and the start of it."""

    reason: str
    sample: str


def _sample(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        raw = raw[: SAMPLE_CHARS * 4].decode("utf-8", errors="replace")
    return raw[:SAMPLE_CHARS] + ("…" if len(raw) > SAMPLE_CHARS else "")


class FrameDecoder:
    """Turns WebSocket message payloads into frames of the given registry.

    ``frame_types`` maps wire ``type`` to frame class (``CONNECTOR_FRAMES`` on the
    gateway, ``GATEWAY_FRAMES`` on a connector). A line longer than ``max_line_bytes``
    is rejected whole, without buffering more of it than the limit, so a peer cannot
    grow our memory by never sending a newline. ``codec``: the process's by default
    (`ACTIVE`); the frames and rejections are the same with any.
    """

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = (
        "_fast_loads",
        "_frame_types",
        "_max_line_bytes",
        "_oversized_sample",
        "_partial",
        "_takes_results",
    )

    def __init__(
        self,
        frame_types: Mapping[str, type[Frame]],
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        codec: JsonCodec = ACTIVE,
    ) -> None:
        if max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self._frame_types = frame_types
        self._fast_loads = codec.loads
        self._takes_results = frame_types.get(OutboundResult.TYPE) is OutboundResult
        self._max_line_bytes = max_line_bytes
        self._partial = b""
        # While skipping an oversized line: the sample to report once its end arrives.
        self._oversized_sample: str | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete line held for the next message."""
        return len(self._partial)

    def feed(self, payload: str | bytes) -> list[Frame | RejectedFrame]:
        """Decode one WebSocket message's payload; returns the frames it completed."""
        return [
            outbound_result(item, {"success": True}) if isinstance(item, str) else item
            for item in self.feed_with_success_ids(payload)
        ]

    def feed_with_success_ids(self, payload: str | bytes) -> list[Frame | RejectedFrame | str]:
        """`feed`, but a plain success comes out as its request id, a ``str``,
        instead of an `OutboundResult` of ``{"success": True}``: the protocol
        settles the request from the id alone, so that frame would be an object made and
        dropped on every reply. Every other frame is as `feed` makes it.

        A plain success is ``{"type":"outbound_result","requestId":"ID","result":
        {"success":true}}`` in exactly that spelling, with an ID of ASCII letters and
        digits (the ids we send are hex): it means exactly what the full decode makes of
        it, so it is read by its bytes, not decoded: 0.74 us a line, 1.12 through
        `feed` (which makes the frame), against 2.2 for the full decode with
        msgspec and 2.6 with the pure codec (256 a message, best of 15). Only the plain
        success: decoding another result's object alone with msgspec was no faster than
        decoding the whole line, and the attempt cost the pure path 0.3 us a line, so any
        other result goes the full way after two comparisons and no copy."""
        data = (
            payload.encode("utf-8", errors="surrogatepass")
            if isinstance(payload, str)
            else bytes(payload)
        )
        out: list[Frame | RejectedFrame | str] = []
        append, parse, find = out.append, self._parse, data.find
        takes_results = self._takes_results
        start = 0
        while (end := find(b"\n", start)) >= 0:
            if self._oversized_sample is not None:
                append(self._oversized(self._oversized_sample))
                self._oversized_sample = None
            else:
                line = self._partial + data[start:end] if self._partial else data[start:end]
                self._partial = b""
                if len(line) > self._max_line_bytes:
                    append(self._oversized(_sample(line)))
                elif (
                    takes_results
                    and line.startswith(_RESULT_HEAD)
                    and line.endswith(_SUCCESS_TAIL)
                    # (bytes.isalnum: ASCII only; false when empty)
                    and (request_id := line[_ID_AT : len(line) - _TAIL_LEN]).isalnum()
                ):
                    append(request_id.decode("ascii"))  # a plain success (see above)
                elif line and not line.isspace():  # (strip()'s test, without its copy)
                    append(parse(line))
            start = end + 1
        tail = data[start:]
        if tail and self._oversized_sample is None:
            if len(self._partial) + len(tail) > self._max_line_bytes:
                self._oversized_sample = _sample(self._partial + tail)
                self._partial = b""
            else:
                self._partial += tail
        return out

    def _oversized(self, sample: str) -> RejectedFrame:
        return RejectedFrame(f"line longer than {self._max_line_bytes} bytes", sample)

    def _parse(self, line: bytes) -> Frame | RejectedFrame:
        fast = self._fast_loads
        obj = fast(line) if fast is not None else _MISSING
        if obj is _MISSING:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                return RejectedFrame("invalid UTF-8", _sample(line))
            try:
                obj = _decode(text)
            except (ValueError, RecursionError) as exc:
                return RejectedFrame(f"invalid JSON: {exc}"[:200], _sample(text))
        # The samples below come from the text, as on the pure path (the C path took
        # only valid UTF-8): the same characters, the same ellipsis.
        if not isinstance(obj, dict):
            return RejectedFrame(f"JSON {type(obj).__name__} is not an object", _text_sample(line))
        frame_type = obj.get("type")
        if not isinstance(frame_type, str):
            return RejectedFrame("missing or non-string 'type'", _text_sample(line))
        frame_cls = self._frame_types.get(frame_type)
        if frame_cls is None:
            return RejectedFrame(f"unknown type {frame_type!r}"[:200], _text_sample(line))
        try:
            if frame_cls is DescriptorFrame:  # (kept with its line: see the frame)
                return DescriptorFrame.from_wire(obj, bytes(line))
            return frame_cls.from_wire(obj)
        except FrameError as exc:
            return RejectedFrame(f"{frame_type}: {exc}", _text_sample(line))


_RESULT_HEAD = b'{"type":"outbound_result","requestId":"'
_SUCCESS_TAIL = b'","result":{"success":true}}'
_ID_AT = len(_RESULT_HEAD)
_TAIL_LEN = len(_SUCCESS_TAIL)


def _text_sample(line: bytes) -> str:
    return _sample(line.decode("utf-8"))


def _not_json(constant: str) -> Any:
    # Python's parser takes NaN and ±Infinity by default; they are not JSON, and our
    # own encoder refuses them, so a peer's line that carries one is malformed.
    raise ValueError(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_not_json)
_raw_decode = _DECODER.raw_decode


def _decode(text: str) -> Any:
    # raw_decode first: decode() would match leading and trailing white space with two
    # regular expressions per line. Anything unusual (white space around the object,
    # extra data, an error) goes through decode() for its exact answer and message.
    try:
        obj, end = _raw_decode(text)
    except ValueError:
        return _DECODER.decode(text)
    if end != len(text):
        return _DECODER.decode(text)
    return obj

# Built once: json.dumps with non-default options builds a new encoder on every call,
# a measurable share of a request's cost on the hot path.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _prebuilt(ascii_only: bool) -> Callable[[Any], str]:
    # JSONEncoder.encode builds a C encoder object on every call; built once here, a
    # request's frame encodes in 60% of the time. Without circular-reference markers
    # (they would have to be fresh per call), so a self-containing action surfaces as
    # RecursionError, reported below as the ValueError encode() would raise.
    fallback = (_ASCII_ENCODER if ascii_only else _ENCODER).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C speedups (another interpreter): the stdlib path
        return fallback
    strings = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    chunks = make(None, _ENCODER.default, strings, None, ":", ",", False, False, False)

    def encode(obj: Any) -> str:
        if isinstance(obj, str):
            return fallback(obj)
        try:
            return "".join(chunks(obj, 0))
        except RecursionError:
            raise ValueError("Circular reference detected") from None

    return encode


_encode: Callable[[Any], str] = _prebuilt(ascii_only=False)
_encode_ascii: Callable[[Any], str] = _prebuilt(ascii_only=True)



def encode_line(obj: Mapping[str, Any], codec: JsonCodec = ACTIVE) -> str:
    """One JSON object as one wire line (compact, UTF-8 kept readable, ``\\n``-ended).

    Raises ``TypeError``/``ValueError`` for values JSON cannot carry (including NaN,
    which other peers' parsers reject). ``codec``: the process's by default.
    """
    if codec.dumps is not None:
        data = codec.dumps(obj)
        if data is not None:
            return data.decode("utf-8") + "\n"
    line = _encode(obj) + "\n"
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (e.g. echoed from an inbound "\ud83d" escape) cannot be
            # UTF-8; as a JSON escape it can, and the frame still goes out.
            line = _encode_ascii(obj) + "\n"
    return line


def encode_value(obj: Any, codec: JsonCodec = ACTIVE) -> bytes:
    """One JSON value as compact UTF-8 bytes, no newline: a part of a frame that the
    caller splices into a line (the JSON of an object is the JSON of its parts, so the
    line is the one `encode_wire` would make of the whole, but for the escaping of
    a lone surrogate, which stays confined to the part that holds it). Raises as
    `encode_line` does."""
    if codec.dumps is not None:
        data = codec.dumps(obj)
        if data is not None:
            return data
    text = _encode(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _encode_ascii(obj).encode("ascii")


def encode_wire(obj: Mapping[str, Any], codec: JsonCodec = ACTIVE) -> bytes:
    """`encode_line` as the UTF-8 bytes that go on the wire, encoded once: the
    caller's size check is ``len()`` of the result, and the writer sends it as is."""
    if codec.dumps is not None:
        data = codec.dumps(obj)
        if data is not None:
            return data + b"\n"
    text = _encode(obj)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_encode_ascii(obj) + "\n").encode("ascii")


def encode_frame(frame: Frame) -> str:
    return encode_line(frame.to_wire())


def pack_lines(lines: Iterable[str], max_message_bytes: int) -> list[str]:
    """Join lines into as few messages as possible, each at most ``max_message_bytes``
    of UTF-8, keeping order. A single line longer than the limit travels alone (the
    caller decides beforehand whether such a line may be sent at all)."""
    messages: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        n = len(line) if line.isascii() else len(line.encode("utf-8"))
        if current and size + n > max_message_bytes:
            messages.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += n
    if current:
        messages.append("".join(current))
    return messages
