"""The WebSocket's own cutting of plain data frames (``_core/ws_frames.py``) changes
nothing the peer can observe: for any stream of server frames — plain text and binary,
pings, pongs, fragmented messages, a close, a header the protocol rejects — cut into
reads anywhere, :meth:`WebSocket.receive` yields the payloads, the answers (pongs, the
close echo) and the end that the bare ``ClientProtocol`` of ``websockets`` gives for the
same bytes, plus the one check that protocol object leaves to its callers: a text
message that is not UTF-8 fails the connection with 1007 (RFC 6455 §8.1), here modelled
with the standard library's decoder."""

from __future__ import annotations

import base64
import codecs
import hashlib
import itertools
from dataclasses import dataclass

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.frames import Close, Frame, Opcode
from websockets.streams import StreamReader
from websockets.uri import parse_uri

from trio_relay._core.endpoint import Endpoint
from trio_relay._trio.link.upgrade import upgrade
from trio_relay._trio.link.websocket import WebSocketEnded

MAX = 2000
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def answer_101(request: bytes) -> bytes:
    key = next(
        line.split(b":", 1)[1].strip()
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    accept = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )


class ScriptedStream:
    """A byte stream whose server answers the upgrade, then sends ``tail`` cut into the
    reads given (the first read carries the 101 too), then EOF."""

    def __init__(self, tail: bytes, cuts: list[int]) -> None:
        self._tail = tail
        self._cuts = sorted({c for c in cuts if 0 < c < len(tail)})
        self.chunks: list[bytes] = []
        self.sent = bytearray()

    def answer(self, request: bytes) -> None:
        edges = [0, *self._cuts, len(self._tail)]
        pieces = [self._tail[a:b] for a, b in itertools.pairwise(edges)]
        self.chunks = [answer_101(request) + pieces[0], *pieces[1:]]

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.send_nowait(data)

    def send_nowait(self, data: bytes | bytearray | memoryview) -> int:
        if not self.sent:
            self.answer(bytes(data))
        self.sent += data
        return len(data)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return self.chunks.pop(0) if self.chunks else b""

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


@dataclass
class Seen:
    payloads: list[bytes]
    answers: list[tuple[Opcode, bytes]]
    close_received: tuple[int, str] | None
    close_sent: tuple[int, str] | None
    failure: str | None


def client_frames(wire: bytes) -> list[tuple[Opcode, bytes]]:
    reader = StreamReader()
    reader.feed_data(wire)
    out = []
    while reader.buffer:
        parser = Frame.parse(reader.read_exact, mask=True, max_size=None)
        try:
            next(parser)
        except StopIteration as done:
            out.append((done.value.opcode, bytes(done.value.data)))
    return out


def _closes(protocol: ClientProtocol) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
    rcvd, sent = protocol.close_rcvd, protocol.close_sent
    return (
        None if rcvd is None else (rcvd.code, rcvd.reason),
        None if sent is None else (sent.code, sent.reason),
    )


def bare_protocol(tail: bytes, cuts: list[int]) -> Seen:
    protocol = ClientProtocol(parse_uri("ws://relay.test/ws"), max_size=MAX)
    request = protocol.connect()
    protocol.send_request(request)
    stream = ScriptedStream(tail, cuts)
    stream.answer(b"".join(protocol.data_to_send()))
    payloads, written = [], bytearray()
    text: codecs.IncrementalDecoder | None = None  # the text message being received
    failed = False
    # Fed a byte at a time, so that each frame is judged as it completes: a frame after
    # a text message that fails the connection is never processed (no pong for a ping).
    received = b"".join(stream.chunks)
    for byte in [received[i : i + 1] for i in range(len(received))] + [b""]:
        if failed:
            break
        if byte:
            protocol.receive_data(byte)
        else:
            protocol.receive_eof()
        for event in protocol.events_received():
            if isinstance(event, Frame) and event.opcode in (
                Opcode.TEXT,
                Opcode.BINARY,
                Opcode.CONT,
            ):
                if event.opcode is Opcode.TEXT:
                    text = codecs.getincrementaldecoder("utf-8")()
                elif event.opcode is Opcode.BINARY:
                    text = None
                try:
                    if text is not None:
                        text.decode(bytes(event.data), event.fin)
                except UnicodeDecodeError as exc:
                    reason = f"text message is not valid UTF-8: {exc.reason} at byte {exc.start}"
                    protocol.fail(1007, reason)
                    failed = True
                    break
                if event.fin:
                    text = None
                payloads.append(bytes(event.data))
        written += b"".join(protocol.data_to_send())
    rcvd, sent = _closes(protocol)
    failure = None if protocol.parser_exc is None else type(protocol.parser_exc).__name__
    return Seen(payloads, client_frames(bytes(written)), rcvd, sent, failure)


def through_websocket(tail: bytes, cuts: list[int]) -> Seen:
    async def main() -> Seen:
        stream = ScriptedStream(tail, cuts)
        endpoint = Endpoint.from_url("ws://relay.test/ws")
        ws = await upgrade(stream, endpoint, headers=[], max_message_bytes=MAX)
        written_before = len(stream.sent)
        payloads: list[bytes] = []
        while True:
            try:
                payloads += [bytes(p) for p in await ws.receive()]
            except WebSocketEnded:
                break
            await ws.flush()
        await ws.flush()
        answers = client_frames(bytes(stream.sent[written_before:]))
        return Seen(payloads, answers, ws.close_received, ws.close_sent, ws.protocol_failure)

    return trio.run(main)


def plain(opcode: Opcode) -> st.SearchStrategy[bytes]:
    # Text as text mostly (emoji and all), and now and then bytes that are not UTF-8.
    data = st.one_of(st.text(max_size=150).map(str.encode), st.binary(max_size=300))
    return data.map(lambda data: Frame(opcode, data).serialize(mask=False))


def fragmented() -> st.SearchStrategy[bytes]:
    def build(parts: list[bytes]) -> bytes:
        frames = [Frame(Opcode.TEXT, parts[0], fin=False)]
        frames += [Frame(Opcode.CONT, p, fin=False) for p in parts[1:-1]]
        frames.append(Frame(Opcode.CONT, parts[-1], fin=True))
        return b"".join(f.serialize(mask=False) for f in frames)

    # A character may be split across fragments: cut valid text anywhere, bytes too.
    def cut(case: tuple[bytes, list[int]]) -> list[bytes]:
        data, cuts = case
        edges = [0, *sorted(c % len(data) for c in cuts), len(data)]
        return [data[a:b] for a, b in itertools.pairwise(edges)]

    text = st.text(min_size=1, max_size=100).map(str.encode)
    parts = st.one_of(
        st.tuples(text, st.lists(st.integers(0, 400), min_size=1, max_size=3)).map(cut),
        st.lists(st.binary(max_size=100), min_size=2, max_size=4),
    )
    return parts.map(build)


def control(opcode: Opcode) -> st.SearchStrategy[bytes]:
    return st.binary(max_size=125).map(lambda data: Frame(opcode, data).serialize(mask=False))


close_frame = st.sampled_from([1000, 1001, 4401, 4000]).map(
    lambda code: Frame(Opcode.CLOSE, Close(code, "bye").serialize()).serialize(mask=False)
)
rejected = st.sampled_from(
    [
        bytes((0x81, 0x83)) + b"\x00\x00\x00\x00abc",  # masked by the server
        bytes((0xC1, 3)) + b"abc",  # a reserved bit without an extension
        bytes((0x83, 3)) + b"abc",  # an unknown opcode
        bytes((0x81, 126)) + (MAX + 1).to_bytes(2, "big"),  # over the size limit
        Frame(Opcode.CONT, b"stray").serialize(mask=False),  # a continuation, no start
    ]
)
frame = st.one_of(
    plain(Opcode.TEXT),
    plain(Opcode.BINARY),
    fragmented(),
    control(Opcode.PING),
    control(Opcode.PONG),
    close_frame,
    rejected,
)
stream_of_frames = st.lists(frame, max_size=12).flatmap(
    lambda frames: st.tuples(
        st.just(b"".join(frames)),
        st.lists(st.integers(min_value=1, max_value=max(1, sum(map(len, frames)))), max_size=6),
    )
)


@settings(max_examples=300, deadline=None)
@given(stream_of_frames)
def test_receive_matches_the_bare_protocol_for_any_frames_cut_anywhere(
    case: tuple[bytes, list[int]],
) -> None:
    tail, cuts = case
    assert through_websocket(tail, cuts) == bare_protocol(tail, cuts)


def test_frames_in_the_same_read_as_the_101_are_received_without_another_read() -> None:
    tail = Frame(Opcode.TEXT, b'{"type":"hello"}\n').serialize(mask=False)

    async def main() -> list[bytes]:
        stream = ScriptedStream(tail, [])
        endpoint = Endpoint.from_url("ws://relay.test/ws")
        ws = await upgrade(stream, endpoint, headers=[], max_message_bytes=MAX)
        assert stream.chunks == []  # the one read carried the 101 and the frame
        return await ws.receive()

    assert trio.run(main) == [b'{"type":"hello"}\n']


def test_a_send_while_open_is_a_plain_masked_text_frame() -> None:
    async def main() -> bytes:
        stream = ScriptedStream(b"", [])
        endpoint = Endpoint.from_url("ws://relay.test/ws")
        ws = await upgrade(stream, endpoint, headers=[], max_message_bytes=MAX)
        before = len(stream.sent)
        ws.send_text(b"one")
        ws.send_text(b"two")
        await ws.flush()
        return bytes(stream.sent[before:])

    assert client_frames(trio.run(main)) == [(Opcode.TEXT, b"one"), (Opcode.TEXT, b"two")]


def test_two_frames_sent_get_different_masking_keys() -> None:
    async def main() -> bytes:
        stream = ScriptedStream(b"", [])
        ws = await upgrade(
            stream, Endpoint.from_url("ws://relay.test/ws"), headers=[], max_message_bytes=MAX
        )
        before = len(stream.sent)
        ws.send_text(b"same")
        ws.send_text(b"same")
        await ws.flush()
        return bytes(stream.sent[before:])

    wire = trio.run(main)
    first, second = wire[: len(wire) // 2], wire[len(wire) // 2 :]
    assert first[2:6] != second[2:6]
