"""PassthroughForward.from_wire (docs/protocol.md, "Frames, connector to gateway")."""

from __future__ import annotations

import base64
import copy
import dataclasses
import pickle
from typing import Any

import pytest

from trio_relay._core.codec import FrameDecoder, encode_line
from trio_relay._core.frames import CONNECTOR_FRAMES, FrameError, PassthroughFrame
from trio_relay._core.passthrough import PassthroughForward

BODY = b"token=abc&command=%2Fask&text=hi\x00\xff"
FULL: dict[str, Any] = {
    "platform": "slack",
    "botId": "B123",
    "method": "POST",
    "path": "/slack/commands",
    "headers": [
        ["Content-Type", "application/x-www-form-urlencoded"],
        ["X-Slack-Signature", "v0=abc"],
        ["X-Custom", "1"],
        ["X-Custom", "2"],
    ],
    "bodyB64": base64.b64encode(BODY).decode(),
    "profile": "work",
    "future_field": {"x": 1},
}


def fwd(**fields: Any) -> PassthroughForward:
    return PassthroughForward.from_wire(fields)


def test_full_forward() -> None:
    f = PassthroughForward.from_wire(FULL)
    assert f.platform == "slack"
    assert f.bot_id == "B123"
    assert f.method == "POST"
    assert f.path == "/slack/commands"
    assert f.headers == (
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("X-Slack-Signature", "v0=abc"),
        ("X-Custom", "1"),
        ("X-Custom", "2"),  # order and duplicates kept: they can matter to signatures
    )
    assert f.body == BODY
    assert f.profile == "work"
    assert f.raw == FULL
    assert f.raw["future_field"] == {"x": 1}


def test_empty_forward_defaults() -> None:
    f = fwd()
    assert f == PassthroughForward("", "", "POST", "/", (), b"", None, {})


@pytest.mark.parametrize("obj", [None, [], "x", 1])
def test_not_an_object(obj: Any) -> None:
    with pytest.raises(FrameError, match="object"):
        PassthroughForward.from_wire(obj)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("get", "GET"), ("Put", "PUT"), ("POST", "POST"), (None, "POST"), ("", "POST"), (5, "POST")],
)
def test_method(value: Any, expected: str) -> None:
    assert fwd(method=value).method == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("/a/b?c=1", "/a/b?c=1"), (None, "/"), ("", "/"), (["/a"], "/")],
)
def test_path(value: Any, expected: str) -> None:
    assert fwd(path=value).path == expected


def test_platform_and_bot_id_coercions() -> None:
    f = fwd(platform=1, botId=["B"])
    assert f.platform == "" and f.bot_id == ""
    assert fwd(bot_id="B").bot_id == ""  # the wire name is botId
    assert fwd(botId="B").bot_id == "B"


def test_malformed_header_pairs_dropped() -> None:
    f = fwd(
        headers=[
            ["A", "1"],
            ["B"],
            ["C", "3", "extra"],
            [1, "x"],
            ["D", 4],
            ["E", None],
            "ab",  # a two-character string is not a pair
            {"F": "6"},
            None,
            ("G", "7"),
            [],
            ["H", ""],
        ]
    )
    assert f.headers == (("A", "1"), ("G", "7"), ("H", ""))


@pytest.mark.parametrize("value", [None, {"A": "1"}, "A: 1", 5])
def test_headers_not_a_list(value: Any) -> None:
    assert fwd(headers=value).headers == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (base64.b64encode(b"\xfb\xff\xfe").decode(), b"\xfb\xff\xfe"),  # uses '+' and '/'
        ("aGk=", b"hi"),
        ("", b""),
        (None, b""),
        (123, b""),
        ("aGk", b""),  # missing padding
        ("!!!!", b""),
        ("aG k=", b""),  # stray characters are not silently skipped
        ("-_-_", b""),  # url-safe alphabet is not standard base64
        ("é===", b""),
        ("aGk=\n", b""),
    ],
)
def test_body(value: Any, expected: bytes) -> None:
    assert fwd(bodyB64=value).body == expected


def test_body_field_name_is_body_b64() -> None:
    assert fwd(body="aGk=").body == b""


@pytest.mark.parametrize(("value", "expected"), [("p", "p"), (None, None), (1, None)])
def test_profile(value: Any, expected: str | None) -> None:
    assert fwd(profile=value).profile == expected


def test_from_a_decoded_frame() -> None:
    line = encode_line({"type": "passthrough_forward", "forward": FULL, "bufferId": "b1"})
    [frame] = FrameDecoder(CONNECTOR_FRAMES).feed(line)
    assert isinstance(frame, PassthroughFrame) and frame.buffer_id == "b1"
    assert PassthroughForward.from_wire(frame.forward).body == BODY


def test_immutable_hashable_copyable() -> None:
    f = PassthroughForward.from_wire(FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.body = b""  # type: ignore[misc]
    assert hash(f) == hash(PassthroughForward.from_wire(FULL))
    assert pickle.loads(pickle.dumps(f)) == f
    assert copy.deepcopy(f) == f
    assert "raw" not in repr(f)
