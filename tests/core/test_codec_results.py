"""Result lines in the connector's usual spelling are read without decoding the whole
line (``FrameDecoder``'s short path for ``outbound_result``); they must mean exactly
what the full decode makes of them.

The reference is the same decoder fed the same line after one leading space: JSON
allows it, and it keeps the line off the short path (a rejection's position then reads
one character later, and is moved back). Every case runs with each codec
this machine has (the pure one always, msgspec when installed)."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.codec import PURE, FrameDecoder, JsonCodec, RejectedFrame, msgspec_codec
from trio_relay._core.frames import CONNECTOR_FRAMES, GATEWAY_FRAMES, OutboundResult

FAST = msgspec_codec()
CODECS = [PURE] if FAST is None else [PURE, FAST]
IDS = [c.name for c in CODECS]

HEAD = b'{"type":"outbound_result","requestId":"'


def decoded(codec: JsonCodec, line: bytes) -> list[Any]:
    return FrameDecoder(CONNECTOR_FRAMES, codec=codec).feed(line + b"\n")


def assert_means_what_the_full_decode_does(codec: JsonCodec, line: bytes) -> None:
    assert line.startswith(HEAD)  # (the case is about the short path, or it proves nothing)
    [got] = decoded(codec, line)
    [want] = decoded(codec, b" " + line)
    if isinstance(want, RejectedFrame):
        assert isinstance(got, RejectedFrame), (line, got)
        assert got.reason == _one_back(want.reason), line
    else:
        # repr shows the types too: 1 against 1.0 or True, which compare equal.
        assert repr(got) == repr(want), line
        assert type(got) is OutboundResult


def _one_back(reason: str) -> str:
    """``reason`` as it reads for the line without the leading space."""
    return re.sub(r"(column|char) (\d+)", lambda m: f"{m[1]} {int(m[2]) - 1}", reason)


def result(request_id: bytes, tail: bytes) -> bytes:
    return HEAD + request_id + b'","result":' + tail


LINES = [
    result(b"0123456789abcdef", b'{"success":true}}'),
    result(b"r1", b'{"success":true,"messageId":"m.1"}}'),
    result(b"r1", b'{"success":false,"error":"no such chat","code":"not_found"}}'),
    result(b"r1", b"{}}"),
    result(b"r1", b'{"success":true,"success":false}}'),  # duplicate key: the last wins
    result(b"r1", b'{"nested":{"a":[1,2.5,null,"\\u00e9"]}}}'),
    result(b"r1", '{"text":"é ☃ 😀"}}'.encode()),
    result(b"r1", b'{"v":NaN}}'),
    result(b"r1", b'{"v":1e400}}'),
    result(b"r1", b'{"v":"\\ud800"}}'),
    result(b"r1", b'{"v":"\xff"}}'),  # invalid UTF-8
    result(b"r1", b'{"v":"\x01"}}'),  # raw control character
    result(b"r1", b'{"success":true} }'),
    result(b"r1", b'{"success":true}} '),
    result(b"r1", b'{"success":true}}\r'),
    result(b"r1", b'{"success":true}}}'),
    result(b"r1", b'{"success":true}'),
    result(b"r1", b'{"success":true}}x'),
    result(b"r1", b'{"success":true}x'),  # the object complete, then no closing brace
    result(b"r1", b'{"v":1} ]'),
    result(b"r1", b'{"success":true},"extra":1}'),
    result(b"r1", b'{"success":true},"result":{"success":false}}'),
    result(b"r1", b"null}"),
    result(b"r1", b"1}"),
    result(b"r1", b'"done"}'),
    result(b"r1", b"[]}"),
    result(b"r1", b'{"v":"}"}}'),
    result(b"", b'{"success":true}}'),
    result(b"a-b_c", b'{"success":true}}'),
    result(b"\\u0041", b'{"success":true}}'),
    result("é".encode(), b'{"success":true}}'),
    result(b'r1","requestId":"r2', b'{"success":true}}'),  # duplicate id key
    result(b'r1","result":{"success":false},"x":"', b'{"success":true}}'),
    HEAD + b'r1"}',
    HEAD + b'r1","result"',
    HEAD,
]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_result_line_means_what_the_full_decode_makes_of_it(
    codec: JsonCodec, line: bytes
) -> None:
    assert_means_what_the_full_decode_does(codec, line)


def test_the_cases_cover_frames_and_rejections() -> None:
    outcomes = [type(decoded(PURE, line)[0]) for line in LINES]
    assert OutboundResult in outcomes and RejectedFrame in outcomes


def test_a_plain_success_gets_a_result_of_its_own() -> None:
    # The result dict is the caller's (Outcome.result): never one shared between replies.
    decoder = FrameDecoder(CONNECTOR_FRAMES)
    line = result(b"r1", b'{"success":true}}') + b"\n"
    [first], [second] = decoder.feed(line), decoder.feed(line)
    assert first.result == second.result == {"success": True}
    assert first.result is not second.result


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_success_ids_name_exactly_the_plain_successes(codec: JsonCodec, line: bytes) -> None:
    # feed_with_success_ids (the protocol's) gives the request id of a line that feed
    # makes a plain success of, and every other line's frame or rejection unchanged.
    [frame] = FrameDecoder(CONNECTOR_FRAMES, codec=codec).feed(line + b"\n")
    [got] = FrameDecoder(CONNECTOR_FRAMES, codec=codec).feed_with_success_ids(line + b"\n")
    if isinstance(got, str):
        assert frame == OutboundResult(got, {"success": True})
        assert repr(frame.result) == "{'success': True}"  # True, not 1
    else:
        assert repr(got) == repr(frame)


def test_success_ids_come_in_stream_order_among_other_frames() -> None:
    plain = result(b"r1", b'{"success":true}}')
    other = result(b"r2", b'{"success":false,"error":"no"}}')
    data = b"\n".join([plain, other, b"[]", plain.replace(b"r1", b"r3")]) + b"\n"
    decoder = FrameDecoder(CONNECTOR_FRAMES)
    got = decoder.feed_with_success_ids(data[:50]) + decoder.feed_with_success_ids(data[50:])
    assert got[0] == "r1" and got[3] == "r3"
    assert got[1] == OutboundResult("r2", {"success": False, "error": "no"})
    assert isinstance(got[2], RejectedFrame)


def test_a_registry_without_results_rejects_them_as_before() -> None:
    # The gateway's own frames (what a connector decodes) have no outbound_result.
    line = result(b"r1", b'{"success":true}}') + b"\n"
    [frame] = FrameDecoder(GATEWAY_FRAMES).feed(line)
    assert isinstance(frame, RejectedFrame)
    assert FrameDecoder(GATEWAY_FRAMES).feed_with_success_ids(line) == [frame]
    assert frame.reason == "unknown type 'outbound_result'"


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)  # lone surrogates included
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(max_examples=300, deadline=None)
@given(
    request_id=st.text(string.ascii_letters + string.digits + '-_"\\é\x00', max_size=12),
    value=json_values,
    ascii_only=st.booleans(),
    tail=st.sampled_from(["}", " }", "}}", "", ',"x":1}']),
)
def test_any_result_line_means_what_the_full_decode_makes_of_it(
    codec: JsonCodec, request_id: str, value: Any, ascii_only: bool, tail: str
) -> None:
    escaped_id = json.dumps(request_id, ensure_ascii=ascii_only)[1:-1]
    encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only) + tail
    line = result(
        escaped_id.encode("utf-8", "surrogatepass"), encoded.encode("utf-8", "surrogatepass")
    )
    assert_means_what_the_full_decode_does(codec, line)
