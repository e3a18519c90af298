"""The scripts of the hostile-connector test (``test_hostile.py``): what a connector
that sends arbitrary valid, malformed, duplicated, reordered and oversized frames puts
on the wire, drawn by Hypothesis, and how the byte stream is cut into messages.

Each line's effect is known when it is drawn (:class:`Item`), so the test can check
the relay against it exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st

from trio_relay.testing import JsonObject, default_descriptor

LINE_LIMIT = 2048
MESSAGE_LIMIT = 16 * 1024
MAX_PENDING = 4

# Lines the codec must reject, one reason each (all end up in stats.frames_rejected).
MALFORMED = [
    b"not json",
    b"{",
    b'{"type": "outbound_result", ',
    b"[1, 2]",
    b'"a string"',
    b"42",
    b"null",
    b"true",
    b"{}",
    b'{"no_type": 1}',
    b'{"type": 5}',
    b'{"type": null}',
    b'{"type": "from_the_future"}',
    b'{"type": "hello", "platform": "x"}',  # a gateway frame, not ours to receive
    b'{"type": "outbound_result"}',  # no requestId
    b'{"type": "outbound_result", "requestId": 7, "result": {}}',
    b'{"type": "outbound_result", "requestId": "x", "result": []}',
    b'{"type": "inbound"}',  # no event
    b'{"type": "inbound", "event": "text"}',
    b'{"type": "inbound", "event": {}, "bufferId": true}',
    b'{"type": "descriptor"}',
    b'{"type": "descriptor", "descriptor": []}',
    b'{"type": "interrupt_inbound", "session_key": "s"}',  # no chat_id
    b'{"type": "passthrough_forward"}',
    b'{"type": "passthrough_forward", "forward": 1}',
    b"\xff\xfe\xfd",
    b'{"type": "going_idle_ack", "x": "\xc3\x28"}',  # invalid UTF-8 inside JSON
    b'{"type": "outbound_result", "requestId": "x", "result": {"a": NaN',
    b"[" * 5000,  # deep nesting (and over the line limit)
]
# Events with fields of the wrong kind: decoded leniently (defaults) and, having no
# usable dedupe key, handled once per copy (fail open), never rejected.
LENIENT = [
    b'{"type": "inbound", "event": {"source": 5}}',
    b'{"type": "inbound", "event": {"source": "C1", "message_id": [1]}, "bufferId": "l-1"}',
    b'{"type": "inbound", "event": {"text": 7, "message_type": "hologram"}}',
]


@dataclass(frozen=True)
class Item:
    """One line of the script. ``rejected`` is how much it adds to
    ``stats.frames_rejected``; the other fields are its intended effect."""

    kind: str
    payload: Any = None
    request: int | None = None  # index of the pending request a result is for
    message: int | None = None  # id of a valid inbound message
    rejected: int = 0

    def render(self, ids: list[str]) -> bytes:
        if self.kind in ("raw", "lenient"):
            assert isinstance(self.payload, bytes)
            return self.payload + b"\n"
        if self.kind == "result":
            assert self.request is not None
            frame = {"type": "outbound_result", "requestId": ids[self.request], **self.payload}
        elif self.kind == "oversized":
            target = ids[self.request] if self.request is not None else "unknown"
            pad = "p" * (LINE_LIMIT + 1)
            frame = {"type": "outbound_result", "requestId": target,
                     "result": {"success": True, "pad": pad}}
        else:
            frame = self.payload
        return json.dumps(frame).encode() + b"\n"


def result_items(pending: int) -> st.SearchStrategy[Item]:
    if pending == 0:
        return st.nothing()
    variants = st.sampled_from([
        lambda tag: {"result": {"success": True, "tag": tag}},
        lambda tag: {"result": {"success": False, "error": "nope", "code": "x", "tag": tag}},
        lambda tag: {},  # missing result reads as {}
        lambda tag: {"result": None},
    ])
    return st.builds(
        lambda i, variant, tag: Item("result", variant(tag), request=i),
        st.integers(0, pending - 1), variants, st.integers(0, 999),
    )


def event(message: int, buffered: bool) -> JsonObject:
    frame: JsonObject = {
        "type": "inbound",
        "event": {
            "text": f"hello {message}",
            "message_id": f"h{message}",
            "source": {"platform": "relay", "chat_id": f"C{message % 3}", "user_id": "U1"},
        },
    }
    if buffered:
        frame["bufferId"] = f"hb{message}"
    return frame


GARBAGE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="{\n", blacklist_categories=("Cs",)),
    max_size=40,
)


def items(pending: int) -> st.SearchStrategy[Item]:
    return st.one_of(
        result_items(pending),
        st.builds(lambda s: Item("unknown", {"type": "outbound_result", "requestId": f"u{s}",
                                             "result": {"success": True}}), st.integers(0, 9)),
        st.just(Item("descriptor", {"type": "descriptor",
                                    "descriptor": default_descriptor("relay")})),
        st.builds(lambda m, b: Item("inbound", event(m, b), message=m),
                  st.integers(0, 5), st.booleans()),
        st.builds(lambda s: Item("interrupt", {"type": "interrupt_inbound",
                                               "session_key": f"s{s}", "chat_id": "C1"}),
                  st.integers(0, 3)),
        st.just(Item("idle_ack", {"type": "going_idle_ack"})),
        st.sampled_from(MALFORMED).map(lambda raw: Item("raw", raw, rejected=1)),
        st.sampled_from(LENIENT).map(lambda raw: Item("lenient", raw)),
        # Arbitrary text with no '{' is never a JSON object: rejected unless blank
        # (blank lines are skipped silently, docs/protocol.md, "Transport": a keep-alive newline).
        GARBAGE_TEXT.map(lambda t: Item("raw", t.encode(), rejected=int(bool(t.encode().strip())))),
        # \xff is never valid UTF-8, whatever follows it.
        st.binary(max_size=30).map(
            lambda b: Item("raw", b"\xff" + b.replace(b"\n", b""), rejected=1)
        ),
        st.builds(lambda i: Item("oversized", request=i, rejected=1),
                  st.integers(0, pending - 1) if pending else st.none()),
    )


@dataclass
class Script:
    pending: int
    items: list[Item]
    cuts: list[int]
    binary: bool
    end_with_oversized_message: bool

    @property
    def expected_rejected(self) -> int:
        return sum(item.rejected for item in self.items)


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    pending = draw(st.integers(0, MAX_PENDING))
    return Script(
        pending=pending,
        items=draw(st.lists(items(pending), max_size=25)),
        cuts=draw(st.lists(st.integers(1, 3000), max_size=12)),
        binary=draw(st.booleans()),
        end_with_oversized_message=draw(st.booleans()),
    )


def cut(stream: bytes, sizes: list[int]) -> list[bytes]:
    """Split ``stream`` into messages of the drawn sizes (the rest in one piece), none
    over ``MESSAGE_LIMIT``."""
    chunks, at = [], 0
    for size in sizes:
        if at >= len(stream):
            break
        chunks.append(stream[at : at + size])
        at += size
    while at < len(stream):
        chunks.append(stream[at : at + MESSAGE_LIMIT])
        at += MESSAGE_LIMIT
    return chunks


def as_message(chunk: bytes, binary: bool) -> str | bytes:
    if binary:
        return chunk
    try:
        return chunk.decode("utf-8")  # a text message when the cut allows it
    except UnicodeDecodeError:
        return chunk
