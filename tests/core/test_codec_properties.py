"""Property tests for the frame codec: splitting, round trips, robustness to garbage."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.codec import (
    SAMPLE_CHARS,
    FrameDecoder,
    RejectedFrame,
    encode_frame,
    pack_lines,
)
from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    GATEWAY_FRAMES,
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)

SETTINGS = settings(max_examples=200, deadline=None)
# Streams of several frames cost more per example; fewer still cover every shape.
STREAM_SETTINGS = settings(max_examples=100, deadline=None)

# Any text JSON can carry (hypothesis' text() already leaves out lone surrogates).
_text = st.text(max_size=12)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=6,
)
_object = st.dictionaries(_text, _json, max_size=3)
_opt_text = st.none() | _text
_buffer_id = st.none() | _text


def _action() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda op, rest: {**rest, "op": op}, _text, _object)


CONNECTOR_FRAME = st.one_of(
    st.builds(DescriptorFrame, _object),
    st.builds(InboundFrame, _object, _buffer_id),
    st.builds(OutboundResult, _text, _object),
    st.builds(InterruptInbound, _text, _text),
    st.just(GoingIdleAck()),
    st.builds(PassthroughFrame, _object, _buffer_id),
)
GATEWAY_FRAME = st.one_of(
    st.builds(Hello, _text, _text, st.none() | st.lists(_json, max_size=3)),
    st.builds(Outbound, _text, _action(), _opt_text, _opt_text),
    st.builds(Interrupt, _text, _opt_text),
    st.just(GoingIdle()),
    st.builds(InboundAck, _text),
)

GOOD = GoingIdleAck()
GOOD_LINE = encode_frame(GOOD)


def _feed_all(decoder: FrameDecoder, chunks: list[Any]) -> list[Frame | RejectedFrame]:
    out: list[Frame | RejectedFrame] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out


def _size(text: str) -> int:
    return len(text.encode())


def _lines(message: str) -> list[str]:
    # Not str.splitlines(): that also splits on \x0c, \u2028 and other characters
    # the wire protocol treats as ordinary text.
    return [part + "\n" for part in message.split("\n")[:-1]]


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


@SETTINGS
@given(CONNECTOR_FRAME)
def test_connector_frame_round_trip(frame: Frame) -> None:
    assert FrameDecoder(CONNECTOR_FRAMES).feed(encode_frame(frame)) == [frame]


@SETTINGS
@given(GATEWAY_FRAME)
def test_gateway_frame_round_trip(frame: Frame) -> None:
    assert FrameDecoder(GATEWAY_FRAMES).feed(encode_frame(frame)) == [frame]


@STREAM_SETTINGS
@given(
    frames=st.lists(CONNECTOR_FRAME, max_size=5),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    crlf=st.booleans(),
)
def test_any_split_decodes_the_same_frames(
    frames: list[Frame], cuts: list[int], crlf: bool
) -> None:
    stream = "".join(encode_frame(f) for f in frames)
    if crlf:
        stream = stream.replace("\n", "\r\n")
    data = stream.encode()
    # Cuts fall anywhere, including inside multi-byte characters and between \r and \n.
    assert _feed_all(FrameDecoder(CONNECTOR_FRAMES), _split(data, cuts)) == frames


@STREAM_SETTINGS
@given(
    frames=st.lists(CONNECTOR_FRAME, max_size=5),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
)
def test_any_split_of_text_payloads(frames: list[Frame], cuts: list[int]) -> None:
    stream = "".join(encode_frame(f) for f in frames)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    bounds = [0, *points, len(stream)]
    chunks = [stream[a:b] for a, b in pairwise(bounds)]
    assert _feed_all(FrameDecoder(CONNECTOR_FRAMES), chunks) == frames


@STREAM_SETTINGS
@given(frames=st.lists(CONNECTOR_FRAME, max_size=6), limit=st.integers(1, 600))
def test_packed_messages_decode_to_the_same_frames(frames: list[Frame], limit: int) -> None:
    messages = pack_lines([encode_frame(f) for f in frames], limit)
    assert _feed_all(FrameDecoder(CONNECTOR_FRAMES), messages) == frames


@SETTINGS
@given(
    lines=st.lists(st.text(max_size=30).map(lambda s: s.replace("\n", "") + "\n"), max_size=20),
    limit=st.integers(1, 100),
)
def test_pack_lines_properties(lines: list[str], limit: int) -> None:
    messages = pack_lines(lines, limit)
    assert "".join(messages) == "".join(lines)  # order and content kept
    assert [_lines(m) for m in messages] == _regroup(lines, messages)
    for i, message in enumerate(messages):
        parts = _lines(message)
        # Over the limit only as a single line that could never fit.
        assert _size(message) <= limit or len(parts) == 1
        # Greedy: the next message's first line would not have fitted here.
        if i + 1 < len(messages):
            first_next = _lines(messages[i + 1])[0]
            assert _size(message) + _size(first_next) > limit


def _regroup(lines: list[str], messages: list[str]) -> list[list[str]]:
    """The input lines grouped as the messages claim, proving no line was split."""
    groups: list[list[str]] = []
    it = iter(lines)
    for message in messages:
        group: list[str] = []
        while "".join(group) != message:
            group.append(next(it))
            assert message.startswith("".join(group))
        groups.append(group)
    return groups


_garbage_chunk = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=150),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=50),  # surrogates too
    st.sampled_from(["\n", "\r\n", "{", "}", '{"type":', '"type":"inbound"}', "[", "\x00"]),
)


@SETTINGS
@given(st.lists(_garbage_chunk, max_size=12))
def test_garbage_never_raises_and_decoder_recovers(chunks: list[Any]) -> None:
    decoder = FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=256)
    out = _feed_all(decoder, chunks)
    for item in out:
        assert isinstance(item, (Frame, RejectedFrame))
        if isinstance(item, RejectedFrame):
            assert item.reason
            assert len(item.sample) <= SAMPLE_CHARS + 1
    assert decoder.buffered_bytes <= 256
    # End whatever line the garbage left open; the next valid frame decodes.
    decoder.feed("\n")
    assert decoder.feed(GOOD_LINE) == [GOOD]
    assert decoder.buffered_bytes == 0


@SETTINGS
@given(
    chunks=st.lists(st.binary(max_size=200) | st.just(b"\n"), max_size=30),
    limit=st.integers(1, 128),
)
def test_buffer_never_exceeds_the_line_limit(chunks: list[bytes], limit: int) -> None:
    decoder = FrameDecoder(CONNECTOR_FRAMES, max_line_bytes=limit)
    for chunk in chunks:
        decoder.feed(chunk)
        assert decoder.buffered_bytes <= limit


@STREAM_SETTINGS
@given(
    before=st.lists(CONNECTOR_FRAME, max_size=3),
    garbage=st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    after=st.lists(CONNECTOR_FRAME, max_size=3),
)
def test_one_bad_line_costs_only_itself(
    before: list[Frame], garbage: bytes, after: list[Frame]
) -> None:
    data = (
        "".join(map(encode_frame, before)).encode()
        + garbage
        + b"\n"
        + "".join(map(encode_frame, after)).encode()
    )
    out = FrameDecoder(CONNECTOR_FRAMES).feed(data)
    frames = [x for x in out if not isinstance(x, RejectedFrame)]
    rejected = [x for x in out if isinstance(x, RejectedFrame)]
    assert len(rejected) <= 1
    # The garbage line is either skipped (blank), rejected, or happens to be a frame.
    assert frames[: len(before)] == before
    if after:
        assert frames[-len(after) :] == after
    assert len(out) in (len(before) + len(after), len(before) + len(after) + 1)
