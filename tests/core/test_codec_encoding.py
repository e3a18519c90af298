"""encode_line/encode_frame and pack_lines: what we put on the wire, and how lines are
batched into messages (docs/protocol.md, "Transport"). Decoding: ``test_codec.py``."""

from __future__ import annotations

import json
import math

import pytest

from trio_relay._core.codec import (
    DEFAULT_MAX_LINE_BYTES,
    FrameDecoder,
    RejectedFrame,
    encode_frame,
    encode_line,
    encode_wire,
    pack_lines,
)
from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    Frame,
    InboundFrame,
    OutboundResult,
)

B = OutboundResult("b", {"success": False, "error": "no"})


def decoder(max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> FrameDecoder:
    return FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=max_line_bytes)


# --- encoding --------------------------------------------------------------------------


def test_encode_line_is_compact_json_with_newline() -> None:
    line = encode_line({"type": "going_idle", "a": [1, 2], "b": {"c": None}})
    assert line == '{"type":"going_idle","a":[1,2],"b":{"c":null}}\n'


def test_encode_line_keeps_utf8_readable() -> None:
    assert encode_line({"t": "héllo 👋"}) == '{"t":"héllo 👋"}\n'


def test_encoded_line_has_no_inner_newline() -> None:
    line = encode_line({"t": "a\nb\r\nc\u2028d"})
    assert line.count("\n") == 1 and line.endswith("\n")
    assert json.loads(line) == {"t": "a\nb\r\nc\u2028d"}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_encode_line_refuses_non_json_floats(value: float) -> None:
    with pytest.raises(ValueError):
        encode_line({"x": value})


def test_encode_line_refuses_unserialisable_values() -> None:
    with pytest.raises(TypeError):
        encode_line({"x": object()})


def test_encode_line_refuses_a_self_containing_value_as_a_value_error() -> None:
    # The prebuilt encoder keeps no circular-reference markers: the recursion it runs
    # into must still come out as the ValueError json.dumps raises, which request()
    # reports as "not JSON-serialisable" (a RecursionError would escape it).
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        encode_line({"x": loop})
    with pytest.raises(ValueError, match="Circular reference"):
        encode_wire({"x": loop})


def test_encode_wire_is_encode_line_as_utf8() -> None:
    obj = {"type": "outbound", "t": "héllo 👋", "n": [1, 2.5, None, True]}
    assert encode_wire(obj) == encode_line(obj).encode("utf-8")


def test_encode_frame() -> None:
    assert encode_frame(B) == encode_line(B.to_wire())
    assert decoder().feed(encode_frame(B)) == [B]


def test_encode_then_decode_inbound_with_buffer_id() -> None:
    frame = InboundFrame({"text": "hi", "source": {"chat_id": "1"}}, "buf-9")
    assert decoder().feed(encode_frame(frame)) == [frame]


# --- batching --------------------------------------------------------------------------


def _size(s: str) -> int:
    return len(s.encode())


def test_pack_nothing() -> None:
    assert pack_lines([], 100) == []


def test_pack_all_fit_in_one_message() -> None:
    lines = ["a\n", "bb\n", "ccc\n"]
    assert pack_lines(lines, 100) == ["a\nbb\nccc\n"]


def test_pack_exactly_at_the_limit() -> None:
    assert pack_lines(["aaaa\n", "bbbb\n"], 10) == ["aaaa\nbbbb\n"]
    assert pack_lines(["aaaa\n", "bbbb\n"], 9) == ["aaaa\n", "bbbb\n"]


def test_pack_greedy_and_ordered() -> None:
    lines = [f"{i:09d}\n" for i in range(7)]  # 10 bytes each
    messages = pack_lines(lines, 25)
    assert messages == ["".join(lines[0:2]), "".join(lines[2:4]), "".join(lines[4:6]), lines[6]]


def test_pack_counts_utf8_bytes_not_characters() -> None:
    line = "é" * 10 + "\n"  # 11 characters, 21 bytes
    assert pack_lines([line, line], 30) == [line, line]
    assert pack_lines([line, line], 42) == [line + line]


def test_pack_never_splits_a_line_and_oversize_travels_alone() -> None:
    big = "x" * 50 + "\n"
    lines = ["a\n", "b\n", big, "c\n"]
    messages = pack_lines(lines, 10)
    assert messages == ["a\nb\n", big, "c\n"]


def test_pack_respects_limit_and_keeps_every_line() -> None:
    lines = [encode_frame(OutboundResult(str(i), {"n": "x" * (i % 13)})) for i in range(100)]
    limit = 200
    messages = pack_lines(lines, limit)
    assert "".join(messages) == "".join(lines)
    assert all(_size(m) <= limit for m in messages)
    rebuilt = [line for m in messages for line in m.splitlines(keepends=True)]
    assert rebuilt == lines
    d = decoder()
    out: list[Frame | RejectedFrame] = []
    for m in messages:
        out += d.feed(m)
    assert out == [OutboundResult(str(i), {"n": "x" * (i % 13)}) for i in range(100)]


def test_pack_accepts_any_iterable() -> None:
    assert pack_lines(iter(["a\n", "b\n"]), 3) == ["a\n", "b\n"]


def test_a_lone_surrogate_is_sent_as_a_json_escape() -> None:
    frame = OutboundResult("r", {"t": "broken emoji \ud83d"})
    line = encode_frame(frame)
    assert "\\ud83d" in line
    line.encode("utf-8")  # the line must be sendable...
    assert pack_lines([line], 100) == [line]  # ...packable...
    assert decoder().feed(line) == [frame]  # ...and mean the same thing
