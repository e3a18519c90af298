"""The hot-path WebSocket frames (``_core/ws_frames.py``): what is cut here, what is left
to the full protocol whole, and when everything is; our masked text frames as an
independent parser (websockets' own) reads them."""

from __future__ import annotations

import pytest
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader
from websockets.utils import apply_mask

from trio_relay._core.ws_frames import InboundFrames, InvalidText, TextValidator, text_frame

MAX = 1000


def server_frame(opcode: Opcode, data: bytes, *, fin: bool = True) -> bytes:
    return Frame(opcode, data, fin).serialize(mask=False)


def parse_client_frame(wire: bytes) -> Frame:
    reader = StreamReader()
    reader.feed_data(wire)
    parser = Frame.parse(reader.read_exact, mask=True, max_size=None)
    try:
        next(parser)
    except StopIteration as done:
        frame = done.value
        assert isinstance(frame, Frame)
        assert not reader.buffer, "the frame is longer than its header says"
        return frame
    raise AssertionError("the parser wanted more bytes than the frame has")


def take_all(frames: InboundFrames, *, plain: bool = True) -> tuple[list[bytes], list[bytes]]:
    payloads: list[bytes] = []
    whole: list[bytes] = []
    while (frame := frames.take(payloads, plain=plain)) is not None:
        whole.append(frame)
    return payloads, whole


# --- inbound ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
def test_a_plain_text_frame_of_any_length_encoding_is_taken_here(size: int) -> None:
    data = bytes(32 + i % 95 for i in range(size))
    frames = InboundFrames(max_size=1 << 20)
    frames.feed(server_frame(Opcode.TEXT, data))
    assert take_all(frames) == ([data], [])
    assert frames.buffered == 0


@pytest.mark.parametrize(
    "data",
    [b"", b"plain ascii", "h\u00e9llo \U0001f600 \u4e16\u754c".encode(), b"\xef\xbb\xbfbom"],
)
def test_a_text_frame_of_valid_utf8_is_taken(data: bytes) -> None:
    frames = InboundFrames(max_size=MAX)
    frames.feed(server_frame(Opcode.TEXT, data))
    assert take_all(frames) == ([data], [])


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe{}",  # never UTF-8
        b'{"a": "\xc3"}',  # a character cut short
        b"\xed\xa0\x80",  # a UTF-16 surrogate, which UTF-8 may not encode
        b"\xc0\x80",  # an overlong NUL
        b"x" * 200 + b"\x80",  # a stray continuation byte, in a 16-bit-length frame
    ],
)
def test_a_text_frame_that_is_not_utf8_raises_after_the_frames_before_it(data: bytes) -> None:
    frames = InboundFrames(max_size=MAX)
    frames.feed(
        server_frame(Opcode.TEXT, b"before")
        + server_frame(Opcode.TEXT, data)
        + server_frame(Opcode.TEXT, b"after")
    )
    payloads: list[bytes] = []
    with pytest.raises(InvalidText, match="not valid UTF-8"):
        frames.take(payloads, plain=True)
    assert payloads == [b"before"]
    # Everything after it is the protocol's (which the shell has failed by then).
    assert frames.passthrough and frames.take(payloads, plain=True) == server_frame(
        Opcode.TEXT, b"after"
    )


def test_a_binary_frame_is_not_checked_for_utf8() -> None:
    frames = InboundFrames(max_size=MAX)
    frames.feed(server_frame(Opcode.BINARY, b"\xff\xfe"))
    assert take_all(frames) == ([b"\xff\xfe"], [])


def test_fragmented_text_is_checked_across_fragments() -> None:
    smile = "\U0001f600".encode()  # four bytes, cut between fragments below
    validator = TextValidator()
    validator.start(smile[:1], final=False)
    validator.feed(smile[1:3], final=False)
    validator.feed(smile[3:], final=True)  # whole again: fine
    validator.start(b"ok", final=True)
    validator.stop()
    validator.feed(b"\xff", final=True)  # a binary message's continuation: not text
    validator.start(smile[:2], final=False)
    with pytest.raises(InvalidText):
        validator.feed(b"", final=True)  # the message ended inside a character
    validator.start(b"\xc3", final=False)
    with pytest.raises(InvalidText):
        validator.feed(b"(", final=False)  # not a continuation byte


def test_a_frame_split_at_every_byte_comes_out_once_complete() -> None:
    wire = server_frame(Opcode.TEXT, b"x" * 300) + server_frame(Opcode.BINARY, b"yz")
    for cut in range(1, len(wire)):
        frames = InboundFrames(max_size=MAX)
        frames.feed(wire[:cut])
        first = take_all(frames)
        frames.feed(wire[cut:])
        second = take_all(frames)
        assert first[0] + second[0] == [b"x" * 300, b"yz"], cut
        assert first[1] == second[1] == []
        assert frames.buffered == 0


def test_a_long_message_read_by_read_is_assembled_without_losing_bytes() -> None:
    data = "".join(map(chr, range(32, 1200))).encode() * 30  # one- to three-byte characters
    wire = server_frame(Opcode.TEXT, data)
    frames = InboundFrames(max_size=1 << 20)
    payloads: list[bytes] = []
    for start in range(0, len(wire), 4096):
        frames.feed(wire[start : start + 4096])
        assert frames.take(payloads, plain=True) is None
    assert payloads == [data]


def test_control_frames_and_fragments_go_to_the_protocol_whole_in_order() -> None:
    ping = server_frame(Opcode.PING, b"p1")
    first_part = server_frame(Opcode.TEXT, b"frag-", fin=False)
    last_part = server_frame(Opcode.CONT, b"ment")
    wire = server_frame(Opcode.TEXT, b"a") + ping + first_part + last_part
    frames = InboundFrames(max_size=MAX)
    frames.feed(wire + server_frame(Opcode.TEXT, b"b"))
    payloads: list[bytes] = []
    assert frames.take(payloads, plain=True) == ping
    assert payloads == [b"a"]
    assert frames.take(payloads, plain=True) == first_part
    # Inside a fragmented message the shell asks for no plain frames: all go whole.
    assert frames.take(payloads, plain=False) == last_part
    assert frames.take(payloads, plain=True) is None
    assert payloads == [b"a", b"b"]


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("masked", bytes((0x81, 0x80 | 3)) + b"\x00\x00\x00\x00abc"),
        ("reserved bit", bytes((0xC1, 3)) + b"abc"),
        ("unknown opcode", bytes((0x83, 3)) + b"abc"),
        ("over the size limit", bytes((0x81, 126)) + (MAX + 1).to_bytes(2, "big")),
        ("64-bit length over the limit", bytes((0x82, 127)) + (1 << 62).to_bytes(8, "big")),
        ("control frame over 125 bytes", bytes((0x89, 126)) + (126).to_bytes(2, "big")),
        ("fragmented control frame", bytes((0x09, 1)) + b"p"),
    ],
)
def test_a_header_the_protocol_rejects_hands_it_everything_from_there_on(
    name: str, header: bytes
) -> None:
    frames = InboundFrames(max_size=MAX)
    frames.feed(server_frame(Opcode.TEXT, b"before") + header)
    payloads: list[bytes] = []
    assert frames.take(payloads, plain=True) == header, name
    assert payloads == [b"before"]
    assert frames.passthrough
    frames.feed(server_frame(Opcode.TEXT, b"after"))
    assert take_all(frames) == ([], [server_frame(Opcode.TEXT, b"after")])


def test_passthrough_from_the_start_takes_nothing_itself() -> None:
    wire = server_frame(Opcode.TEXT, b"compressed, say")
    frames = InboundFrames(max_size=MAX, pending=wire, passthrough=True)
    assert take_all(frames) == ([], [wire])


def test_drain_gives_the_incomplete_rest_for_the_protocol_to_judge() -> None:
    wire = server_frame(Opcode.TEXT, b"complete") + server_frame(Opcode.TEXT, b"cut off")[:5]
    frames = InboundFrames(max_size=MAX, pending=wire)
    assert take_all(frames) == ([b"complete"], [])
    assert frames.drain() == wire[-5:]
    assert frames.buffered == 0


# --- outbound --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 100_000])
def test_our_text_frame_is_what_an_independent_parser_reads(size: int) -> None:
    payload = bytes(i % 256 for i in range(size))
    frame = parse_client_frame(text_frame(payload, b"\x01\x02\x03\x04", apply_mask))
    assert (frame.opcode, frame.fin, frame.data) == (Opcode.TEXT, True, payload)
    assert not (frame.rsv1 or frame.rsv2 or frame.rsv3)


def test_the_payload_is_masked_with_the_key_given() -> None:
    key = b"\xaa\xbb\xcc\xdd"
    wire = text_frame(b"hello", key, apply_mask)
    assert wire[2:6] == key
    assert wire[6:] == bytes(b ^ key[i % 4] for i, b in enumerate(b"hello"))
