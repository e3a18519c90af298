"""FrameDecoder: lines split, malformed and oversized (docs/protocol.md, "Transport").

Encoding and batching: ``test_codec_encoding.py``."""

from __future__ import annotations

import pytest

from trio_relay._core.codec import (
    DEFAULT_MAX_LINE_BYTES,
    SAMPLE_CHARS,
    FrameDecoder,
    RejectedFrame,
    encode_frame,
)
from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    GATEWAY_FRAMES,
    DescriptorFrame,
    Frame,
    GoingIdleAck,
    Hello,
    OutboundResult,
)

A = OutboundResult("a", {"success": True})
B = OutboundResult("b", {"success": False, "error": "no"})
LINE_A = encode_frame(A)
LINE_B = encode_frame(B)


def decoder(max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> FrameDecoder:
    return FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=max_line_bytes)


def assert_sample_ok(rejected: RejectedFrame) -> None:
    assert isinstance(rejected.sample, str)
    assert len(rejected.sample) <= SAMPLE_CHARS + 1  # +1 for the ellipsis


# --- splitting -------------------------------------------------------------------------


def test_one_frame() -> None:
    assert decoder().feed(LINE_A) == [A]


def test_several_frames_in_one_message() -> None:
    assert decoder().feed(LINE_A + LINE_B + LINE_A) == [A, B, A]


def test_frame_split_across_messages() -> None:
    d = decoder()
    half = len(LINE_A) // 2
    assert d.feed(LINE_A[:half]) == []
    assert d.buffered_bytes == half
    assert d.feed(LINE_A[half:]) == [A]
    assert d.buffered_bytes == 0


def test_trailing_partial_line_kept() -> None:
    d = decoder()
    assert d.feed(LINE_A + LINE_B[:5]) == [A]
    assert d.buffered_bytes == 5
    assert d.feed(LINE_B[5:] + LINE_A) == [B, A]


def test_byte_at_a_time() -> None:
    d = decoder()
    data = (LINE_A + LINE_B).encode()
    out: list[Frame | RejectedFrame] = []
    for i in range(len(data)):
        out += d.feed(data[i : i + 1])
    assert out == [A, B]


def test_multibyte_character_split_between_messages() -> None:
    frame = OutboundResult("r", {"text": "héllo 👋"})
    data = encode_frame(frame).encode()
    cut = data.index("👋".encode()) + 2  # inside the 4-byte emoji
    d = decoder()
    assert d.feed(data[:cut]) == []
    assert d.feed(data[cut:]) == [frame]


@pytest.mark.parametrize("kind", [str, bytes, bytearray, memoryview])
def test_payload_kinds(kind: type) -> None:
    payload = LINE_A + LINE_B
    arg = payload if kind is str else kind(payload.encode())
    assert decoder().feed(arg) == [A, B]


def test_non_ascii_text_payload() -> None:
    frame = OutboundResult("r", {"text": "ünïcødé ✓ 日本"})
    assert decoder().feed(encode_frame(frame)) == [frame]


def test_blank_and_whitespace_lines_are_skipped_silently() -> None:
    payload = "\n\n   \n\t\n" + LINE_A + "\r\n" + " \r\n" + LINE_B + "\n"
    assert decoder().feed(payload) == [A, B]


def test_crlf_line_endings() -> None:
    payload = (LINE_A + LINE_B).replace("\n", "\r\n")
    assert decoder().feed(payload) == [A, B]


def test_crlf_split_between_cr_and_lf() -> None:
    d = decoder()
    assert d.feed(LINE_A[:-1] + "\r") == []
    assert d.feed("\n") == [A]


def test_gateway_side_registry() -> None:
    d = FrameDecoder(GATEWAY_FRAMES)
    assert d.feed(encode_frame(Hello("slack", "B1"))) == [Hello("slack", "B1")]
    # A connector frame is an unknown type to the connector's own decoder.
    [rejected] = d.feed(LINE_A)
    assert isinstance(rejected, RejectedFrame) and "unknown type" in rejected.reason


@pytest.mark.parametrize("bad", [0, -1])
def test_max_line_bytes_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=bad)


# --- malformed lines -------------------------------------------------------------------

MALFORMED: list[tuple[str, bytes, str]] = [
    ("invalid-utf8", b'{"type":"going_idle_ack","x":"\xff\xfe"}', "invalid UTF-8"),
    ("invalid-utf8-lone-byte", b"\xc3", "invalid UTF-8"),
    ("invalid-json", b'{"type": "outbound_result",', "invalid JSON"),
    ("invalid-json-word", b"hello", "invalid JSON"),
    ("invalid-json-single-quotes", b"{'type': 'going_idle_ack'}", "invalid JSON"),
    ("json-array", b'[{"type":"going_idle_ack"}]', "list is not an object"),
    ("json-number", b"42", "int is not an object"),
    ("json-string", b'"going_idle_ack"', "str is not an object"),
    ("json-null", b"null", "NoneType is not an object"),
    ("json-true", b"true", "bool is not an object"),
    ("missing-type", b'{"requestId":"a","result":{}}', "missing or non-string 'type'"),
    ("null-type", b'{"type":null}', "missing or non-string 'type'"),
    ("numeric-type", b'{"type":7}', "missing or non-string 'type'"),
    ("list-type", b'{"type":["inbound"]}', "missing or non-string 'type'"),
    ("unknown-type", b'{"type":"bogus"}', "unknown type 'bogus'"),
    ("wrong-direction", b'{"type":"hello","platform":"p","botId":"b"}', "unknown type 'hello'"),
    ("missing-required", b'{"type":"outbound_result"}', "outbound_result: field 'requestId'"),
    ("wrong-kind-required", b'{"type":"inbound","event":"hi"}', "inbound: field 'event'"),
    ("bad-result", b'{"type":"outbound_result","requestId":"r","result":1}', "'result'"),
    ("deep-nesting", b"[" * 100_000, "invalid JSON"),
    ("huge-integer", b'{"type":"going_idle_ack","n":' + b"9" * 5000 + b"}", "invalid JSON"),
]


@pytest.mark.parametrize(
    ("bad", "reason"), [(b, r) for _, b, r in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_line_is_rejected_between_good_frames(bad: bytes, reason: str) -> None:
    d = decoder()
    out = d.feed(LINE_A.encode() + bad + b"\n" + LINE_B.encode())
    assert len(out) == 3
    assert out[0] == A and out[2] == B
    rejected = out[1]
    assert isinstance(rejected, RejectedFrame)
    assert reason in rejected.reason
    assert len(rejected.reason) <= 250
    assert_sample_ok(rejected)
    # ...and the decoder is fine afterwards.
    assert d.feed(LINE_A) == [A]


@pytest.mark.parametrize(
    ("bad", "reason"), [(b, r) for _, b, r in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_line_split_across_messages(bad: bytes, reason: str) -> None:
    d = decoder()
    data = LINE_A.encode() + bad + b"\n" + LINE_B.encode()
    out: list[Frame | RejectedFrame] = []
    for i in range(0, len(data), 7):
        out += d.feed(data[i : i + 7])
    assert out[0] == A and out[-1] == B and len(out) == 3
    assert isinstance(out[1], RejectedFrame) and reason in out[1].reason


def test_several_malformed_lines_keep_stream_order() -> None:
    out = decoder().feed("nope\n" + LINE_A + "[]\n" + LINE_B + '{"type":"x"}\n')
    kinds = [type(x) for x in out]
    assert kinds == [RejectedFrame, OutboundResult, RejectedFrame, OutboundResult, RejectedFrame]


def test_sample_is_the_start_of_the_line_truncated() -> None:
    bad = "x" * 1000
    [rejected] = decoder().feed(bad + "\n")
    assert isinstance(rejected, RejectedFrame)
    assert rejected.sample == "x" * SAMPLE_CHARS + "…"


def test_short_sample_is_not_marked_truncated() -> None:
    [rejected] = decoder().feed("oops\n")
    assert isinstance(rejected, RejectedFrame)
    assert rejected.sample == "oops"


def test_invalid_utf8_sample_is_text() -> None:
    [rejected] = decoder().feed(b"\xff" * 500 + b"\n")
    assert isinstance(rejected, RejectedFrame)
    assert_sample_ok(rejected)
    assert rejected.sample.startswith("\ufffd")


def test_lone_surrogate_in_text_payload_is_rejected_not_raised() -> None:
    out = decoder().feed(LINE_A + '{"type":"going_idle_ack","x":"\ud800"}\n' + LINE_B)
    assert out[0] == A and out[2] == B
    assert isinstance(out[1], RejectedFrame) and out[1].reason == "invalid UTF-8"


def test_escaped_surrogate_in_json_is_not_rejected() -> None:
    # "\ud800" as a JSON escape is valid JSON text; only raw bad bytes are rejected.
    assert decoder().feed('{"type":"going_idle_ack","x":"\\ud800"}\n') == [GoingIdleAck()]


# --- oversized lines -------------------------------------------------------------------

LIMIT = 64
GOING_IDLE_ACK = encode_frame(GoingIdleAck())


def _big_line(n: int) -> str:
    """A *valid* frame line of exactly n bytes including the newline."""
    base = encode_frame(OutboundResult("r", {"p": ""}))
    pad = n - len(base)
    assert pad >= 0
    return encode_frame(OutboundResult("r", {"p": "x" * pad}))


def test_big_line_helper() -> None:
    assert len(_big_line(100).encode()) == 100


def test_line_at_the_limit_is_decoded() -> None:
    line = _big_line(LIMIT + 1)  # LIMIT bytes of content, then the newline
    [frame] = decoder(LIMIT).feed(line)
    assert isinstance(frame, OutboundResult)
    # The same line arriving in pieces: LIMIT bytes may be buffered, not one more.
    d = decoder(LIMIT)
    assert d.feed(line[:-1]) == []
    assert d.buffered_bytes == LIMIT
    assert d.feed("\n") == [frame]


def test_line_one_over_the_limit_is_rejected_even_if_valid() -> None:
    line = _big_line(LIMIT + 2)
    out = decoder(LIMIT).feed(GOING_IDLE_ACK + line + GOING_IDLE_ACK)
    assert out[0] == GoingIdleAck() and out[2] == GoingIdleAck() and len(out) == 3
    assert isinstance(out[1], RejectedFrame)
    assert out[1].reason == f"line longer than {LIMIT} bytes"
    assert_sample_ok(out[1])
    assert out[1].sample.startswith('{"type":"outbound_result"')


def test_line_one_over_the_limit_split_is_rejected() -> None:
    line = _big_line(LIMIT + 2)
    d = decoder(LIMIT)
    assert d.feed(line[:-1]) == []
    out = d.feed("\n" + GOING_IDLE_ACK)
    assert isinstance(out[0], RejectedFrame) and out[1] == GoingIdleAck()


def test_oversized_line_split_across_many_messages() -> None:
    d = decoder(LIMIT)
    big = "y" * 1000
    out = d.feed(GOING_IDLE_ACK + big[:10])
    assert out == [GoingIdleAck()]
    for i in range(10, len(big), 10):
        assert d.feed(big[i : i + 10]) == []
        assert d.buffered_bytes <= LIMIT
    out = d.feed("\n" + GOING_IDLE_ACK)
    assert len(out) == 2
    assert isinstance(out[0], RejectedFrame) and "longer than 64" in out[0].reason
    assert out[0].sample.startswith("y")
    assert_sample_ok(out[0])
    assert out[1] == GoingIdleAck()


def test_line_growing_without_newline_is_not_buffered() -> None:
    d = decoder(1024)
    for _ in range(2000):
        assert d.feed("z" * 100) == []
        assert d.buffered_bytes <= 1024
    assert d.buffered_bytes == 0  # the oversized line is being skipped, not kept
    out = d.feed("tail of the huge line\n" + GOING_IDLE_ACK + GOING_IDLE_ACK[:3])
    assert len(out) == 2
    assert isinstance(out[0], RejectedFrame)
    assert out[0].sample.startswith("zzz")  # the start of the line, not its tail
    assert out[1] == GoingIdleAck()
    assert d.buffered_bytes == 3
    assert d.feed(GOING_IDLE_ACK[3:]) == [GoingIdleAck()]


def test_oversized_tail_crossing_the_limit_in_one_message() -> None:
    d = decoder(LIMIT)
    assert d.feed("a" * (LIMIT - 4)) == []
    assert d.feed("b" * 10) == []  # now over: skipping starts
    assert d.buffered_bytes == 0
    out = d.feed("c\n" + GOING_IDLE_ACK)
    assert len(out) == 2 and isinstance(out[0], RejectedFrame) and out[1] == GoingIdleAck()
    assert out[0].sample.startswith("aaaa")


def test_only_one_rejection_per_oversized_line() -> None:
    d = decoder(LIMIT)
    d.feed("q" * (LIMIT * 3))
    d.feed("q" * (LIMIT * 3))
    out = d.feed("q\n\n\n")
    assert [type(x) for x in out] == [RejectedFrame]


def test_a_descriptor_frame_keeps_the_line_it_was_read_from() -> None:
    """The protocol decodes a descriptor once a process by this line (a connector sends
    the same one on every connection): a frame without it would be decoded anew."""
    line = b'{"type":"descriptor","descriptor":{"platform":"slack","contract_version":1}}'
    d = decoder()
    assert d.feed(line[:30]) == []
    [frame] = d.feed(line[30:] + b"\n")
    assert isinstance(frame, DescriptorFrame)
    assert frame.line == line
    assert frame.descriptor == {"platform": "slack", "contract_version": 1}
    assert frame == DescriptorFrame(frame.descriptor)  # the line is not part of the frame
