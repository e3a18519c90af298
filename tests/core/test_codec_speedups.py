"""The optional C codec (the ``speedups`` extra, msgspec) against the pure path.

Every test here runs over each codec this machine has (the pure one always, msgspec when
installed, as in CI through ``dev``) and demands the pure path's exact answer: the same
frames, or the same rejection with the same reason and sample, for every line; the
same bytes, or the same exception type, for every value encoded. How the process picks
its codec (once, at import; ``TRIO_RELAY_PURE_JSON=1`` to refuse the C one) is checked
in a fresh interpreter."""

from __future__ import annotations

import enum
import importlib.util
import json
import math
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.codec import (
    MAX_FAST_BRACKETS,
    PURE,
    PURE_JSON_ENV,
    FrameDecoder,
    JsonCodec,
    encode_line,
    encode_wire,
    msgspec_codec,
)
from trio_relay._core.frames import CONNECTOR_FRAMES

FAST = msgspec_codec()
CODECS = [PURE] if FAST is None else [PURE, FAST]
IDS = [c.name for c in CODECS]


def decode(codec: JsonCodec, line: bytes) -> str:
    """What a decoder with ``codec`` makes of one line, as text: repr shows the types
    (``1`` against ``1.0``, which compare equal), and a rejection's reason and sample."""
    return repr(FrameDecoder(CONNECTOR_FRAMES, codec=codec).feed(line + b"\n"))


def encode(codec: JsonCodec, value: Any) -> tuple[str, bytes | str]:
    try:
        return "ok", encode_wire(value, codec)
    except Exception as exc:
        return "raises", type(exc).__name__


def result_line(value: str) -> bytes:
    return b'{"type":"outbound_result","requestId":"r","result":{"v":' + value.encode() + b"}}"


NUMBERS = (
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0", "-0.0", "0.1",
    "1E5", "1.5e+16", "01", "1.", ".5", "18446744073709551615", "18446744073709551616",
    "-9223372036854775809", "9" * 30, "9" * 4300, "9" * 4301, "true", "null",
)  # fmt: skip
TRICKY_LINES = [
    b'{"type":"outbound_result","requestId":"r1","result":{"success":true,"id":"m.1"}}',
    b'{"type":"going_idle_ack"}',
    b'  {"type":"going_idle_ack"}  ',
    b'{"type":"going_idle_ack"} extra',
    b'\xef\xbb\xbf{"type":"going_idle_ack"}',
    b'{"type":"going_idle_ack","type":"bogus"}',  # duplicate key: the last wins
    b'{"type":"bogus","type":"going_idle_ack"}',
    b"[1,2]",
    b'"just a string"',
    b"not json",
    b'{"type":"outbound_result",}',
    b'{"type":"outbound_result","requestId":"r","result":"\x01"}',  # raw control char
    b'{"type":"going_idle_ack","x":"\xff"}',  # invalid UTF-8
    b'{"type":"going_idle_ack","x":"\xed\xa0\x80"}',  # an encoded lone surrogate
    b'{"type":"going_idle_ack","x":"\\ud800"}',  # an escaped lone surrogate: valid JSON
    b'{"type":"going_idle_ack","x":"\\ud83d\\ude00 \xe2\x80\xa8 \\u0000"}',
    b"[" * (MAX_FAST_BRACKETS - 1) + b"]" * (MAX_FAST_BRACKETS - 1),
    b"[" * MAX_FAST_BRACKETS + b"]" * MAX_FAST_BRACKETS,
    *(b"[" * depth + b"]" * depth for depth in (980, 990, 995, 1000, 1010)),
    *(result_line(v) for v in NUMBERS),
]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("line", TRICKY_LINES, ids=range(len(TRICKY_LINES)))
def test_every_tricky_line_decodes_as_the_pure_path_decodes_it(
    codec: JsonCodec, line: bytes
) -> None:
    assert decode(codec, line) == decode(PURE, line)


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_nesting_near_the_recursion_limit_decodes_as_the_pure_path_decodes_it(
    codec: JsonCodec,
) -> None:
    # Where the pure path stops depends on the call stack; find it from here, then look
    # just around it, where the C parser (one frame fewer) would go a few levels further.
    low, high = 1, 5000
    while low < high:
        mid = (low + high + 1) // 2
        if "RejectedFrame" in decode(PURE, _nested(mid)):
            high = mid - 1
        else:
            low = mid
    for depth in range(low - 3, low + 12):
        assert decode(codec, _nested(depth)) == decode(PURE, _nested(depth)), depth


def test_the_tricky_lines_cover_both_outcomes() -> None:
    # The corpus above is only a check if it holds lines of both kinds.
    results = [decode(PURE, line) for line in TRICKY_LINES]
    assert any("RejectedFrame" in r for r in results)
    assert any("RejectedFrame" not in r for r in results)
    assert "1e400" in repr(TRICKY_LINES) and "inf" in decode(PURE, result_line("1e400"))


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # lone surrogates included
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    | st.tuples(inner, inner),
    max_leaves=12,
)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_value_encodes_as_the_pure_path_encodes_it(codec: JsonCodec, value: Any) -> None:
    frame = {"type": "outbound", "requestId": "r", "action": {"op": "send", "v": value}}
    assert encode(codec, frame) == encode(PURE, frame)
    if encode(PURE, frame)[0] == "ok":
        assert encode_line(frame, codec) == encode_line(frame, PURE)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_json_text_decodes_as_the_pure_path_decodes_it(codec: JsonCodec, value: Any) -> None:
    # ensure_ascii: lone surrogates travel as escapes; allow_nan: NaN and Infinity appear
    # in the text and must be refused alike.
    text = json.dumps({"type": "outbound_result", "requestId": "r", "result": {"v": value}})
    assert decode(codec, text.encode()) == decode(PURE, text.encode())


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 2


class Name(str):
    pass


def _circular() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


ODD_VALUES = [
    {1: "int key"},
    {True: "bool key"},
    {None: "null key"},
    {1.5: "float key"},
    uuid.UUID(int=1),
    Color.RED,
    Level.HIGH,
    Name("a str subclass"),
    b"bytes",
    (1, "tuple"),
    math.nan,
    [math.inf],
    10**5000,
    "\ud800",
    {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    _circular(),
    object(),
]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_values_the_c_codec_would_take_differently_take_the_pure_path(
    codec: JsonCodec, value: Any
) -> None:
    frame = {"type": "outbound", "requestId": "r", "action": {"op": "send", "v": value}}
    assert encode(codec, frame) == encode(PURE, frame)


def test_the_odd_values_are_refused_and_accepted_by_the_pure_path() -> None:
    outcomes = [encode(PURE, {"v": v})[0] for v in ODD_VALUES]
    assert "ok" in outcomes and "raises" in outcomes


def test_msgspec_codec_exists_exactly_when_msgspec_is_installed() -> None:
    installed = importlib.util.find_spec("msgspec") is not None
    assert (FAST is not None) == installed
    if FAST is not None:
        assert FAST.name == "msgspec" and FAST.loads is not None and FAST.dumps is not None


def _codec_in_a_fresh_process(pure: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != PURE_JSON_ENV}
    if pure is not None:
        env[PURE_JSON_ENV] = pure
    done = subprocess.run(
        [sys.executable, "-c", "from trio_relay._core import codec; print(codec.JSON_CODEC)"],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_process_codec_is_chosen_at_import_and_the_env_var_keeps_it_pure() -> None:
    expected = "json" if FAST is None else "msgspec"
    assert _codec_in_a_fresh_process(None) == expected
    assert _codec_in_a_fresh_process("0") == expected
    assert _codec_in_a_fresh_process("1") == "json"
