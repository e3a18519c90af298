"""Descriptor.from_wire: required fields, coercions and defaults (docs/protocol.md,
"Descriptor")."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from trio_relay._core.descriptor import (
    DEFAULT_MAX_MESSAGE_LENGTH,
    LEGACY_OPS,
    SHARED_DESCRIPTORS,
    Descriptor,
    decoded,
    shared,
)
from trio_relay._core.frames import FrameError

FULL: dict[str, Any] = {
    "contract_version": 1,
    "platform": "telegram",
    "label": "Telegram",
    "max_message_length": 4000,
    "supports_draft_streaming": True,
    "supports_edit": True,
    "supports_threads": True,
    "markdown_dialect": "markdown_v2",
    "len_unit": "utf16",
    "emoji": "✈️",
    "platform_hint": "Keep replies short.",
    "pii_safe": False,
    "supported_ops": ["send", "edit", "typing", "follow_up", "react"],
}


def wire(**changes: Any) -> dict[str, Any]:
    """A minimal valid descriptor with ``changes`` applied (``None`` removes a key)."""
    obj: dict[str, Any] = {"contract_version": 1, "platform": "slack"}
    for key, value in changes.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return obj


def test_full_descriptor() -> None:
    d = Descriptor.from_wire(FULL)
    assert d == Descriptor(
        platform="telegram",
        contract_version=1,
        label="Telegram",
        max_message_length=4000,
        supports_draft_streaming=True,
        supports_edit=True,
        supports_threads=True,
        markdown_dialect="markdown_v2",
        len_unit="utf16",
        emoji="✈️",
        platform_hint="Keep replies short.",
        pii_safe=False,
        supported_ops=("send", "edit", "typing", "follow_up", "react"),
        raw=FULL,
    )


def test_minimal_descriptor_defaults() -> None:
    d = Descriptor.from_wire({"contract_version": 1, "platform": "slack"})
    assert d.label == "slack"
    assert d.max_message_length == DEFAULT_MAX_MESSAGE_LENGTH == 4096
    assert d.supports_draft_streaming is False
    assert d.supports_edit is False
    assert d.supports_threads is False
    assert d.markdown_dialect == "plain"
    assert d.len_unit == "chars"
    assert d.emoji is None and d.platform_hint is None and d.pii_safe is None
    assert d.supported_ops == ()
    assert d.effective_ops == LEGACY_OPS


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        (None, "object"),
        ([], "object"),
        ("slack", "object"),
        ({"contract_version": 1}, "platform"),
        ({"contract_version": 1, "platform": ""}, "platform"),
        ({"contract_version": 1, "platform": "   "}, "platform"),
        ({"contract_version": 1, "platform": 7}, "platform"),
        ({"contract_version": 1, "platform": None}, "platform"),
        ({"platform": "slack"}, "contract_version"),
        ({"platform": "slack", "contract_version": "1"}, "contract_version"),
        ({"platform": "slack", "contract_version": 1.0}, "contract_version"),
        ({"platform": "slack", "contract_version": True}, "contract_version"),
        ({"platform": "slack", "contract_version": None}, "contract_version"),
    ],
)
def test_rejected(obj: Any, match: str) -> None:
    with pytest.raises(FrameError, match=match):
        Descriptor.from_wire(obj)


def test_frame_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Descriptor.from_wire({})


def test_future_contract_version_is_kept() -> None:
    assert Descriptor.from_wire(wire(contract_version=2)).contract_version == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2000, 2000),
        (1, 1),
        (0, 4096),
        (-5, 4096),
        ("2000", 4096),
        (2000.0, 4096),
        (True, 4096),
        (None, 4096),
        ([2000], 4096),
    ],
)
def test_max_message_length(value: Any, expected: int) -> None:
    assert Descriptor.from_wire(wire(max_message_length=value)).max_message_length == expected


@pytest.mark.parametrize(
    "key",
    [
        "supports_draft_streaming",
        "supports_edit",
        "supports_threads",
        "supports_context",
        "supports_inchannel_continuable",
        "supports_block_formatting",
    ],
)
@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (None, False), (1, False), ("true", False), ([], False)],
)
def test_bool_flags(key: str, value: Any, expected: bool) -> None:
    assert getattr(Descriptor.from_wire(wire(**{key: value})), key) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Slack HQ", "Slack HQ"), (None, "slack"), ("", "slack"), (5, "slack")],
)
def test_label_defaults_to_platform(value: Any, expected: str) -> None:
    assert Descriptor.from_wire(wire(label=value)).label == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("slack", "slack"),
        ("discord", "discord"),
        ("markdown_v2", "markdown_v2"),
        ("some_future_dialect", "some_future_dialect"),
        (None, "plain"),
        ("", "plain"),
        (3, "plain"),
    ],
)
def test_markdown_dialect(value: Any, expected: str) -> None:
    assert Descriptor.from_wire(wire(markdown_dialect=value)).markdown_dialect == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("chars", "chars"),
        ("utf16", "utf16"),
        ("UTF16", "chars"),
        ("bytes", "chars"),
        (16, "chars"),
        (None, "chars"),
    ],
)
def test_len_unit(value: Any, expected: str) -> None:
    assert Descriptor.from_wire(wire(len_unit=value)).len_unit == expected


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("emoji", "💬", "💬"),
        ("emoji", 1, None),
        ("emoji", True, None),
        ("platform_hint", "hint", "hint"),
        ("platform_hint", ["hint"], None),
        ("pii_safe", True, True),
        ("pii_safe", False, False),
        ("pii_safe", 0, None),
        ("pii_safe", "yes", None),
    ],
)
def test_optional_fields(key: str, value: Any, expected: Any) -> None:
    assert getattr(Descriptor.from_wire(wire(**{key: value})), key) == expected
    assert getattr(Descriptor.from_wire(wire()), key) is None


@pytest.mark.parametrize(
    ("value", "ops"),
    [
        (["send", "react"], ("send", "react")),
        (["send", 5, None, "delete", {"op": "x"}], ("send", "delete")),
        ([], ()),
        ([1, 2], ()),
        ("send", ()),  # a bare string is not a list of ops
        ({"send": True}, ()),
        (None, ()),
    ],
)
def test_supported_ops(value: Any, ops: tuple[str, ...]) -> None:
    assert Descriptor.from_wire(wire(supported_ops=value)).supported_ops == ops


def test_legacy_ops() -> None:
    assert frozenset({"send", "edit", "typing", "follow_up"}) == LEGACY_OPS


@pytest.mark.parametrize("value", [None, [], [7]])
def test_empty_ops_mean_legacy_set(value: Any) -> None:
    d = Descriptor.from_wire(wire(supported_ops=value))
    assert d.effective_ops == LEGACY_OPS
    for op in LEGACY_OPS:
        assert d.supports(op)
    for op in ("send_media", "react", "delete", "thread_create", "get_chat_info"):
        assert not d.supports(op)


def test_advertised_ops_replace_the_legacy_set() -> None:
    d = Descriptor.from_wire(wire(supported_ops=["send", "react"]))
    assert d.effective_ops == frozenset({"send", "react"})
    assert d.supports("react")
    assert not d.supports("edit")  # not advertised: not assumed
    assert not d.supports("")


def test_unknown_keys_ignored_but_reachable() -> None:
    obj = wire(rate_limit={"per_second": 1}, beta=True)
    d = Descriptor.from_wire(obj)
    assert d.raw == obj
    assert d.raw["rate_limit"] == {"per_second": 1}
    assert not hasattr(d, "rate_limit")


def test_raw_is_a_copy() -> None:
    obj = wire()
    d = Descriptor.from_wire(obj)
    obj["platform"] = "changed"
    assert d.raw["platform"] == "slack"


def test_immutable_hashable_copyable() -> None:
    d = Descriptor.from_wire(FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.platform = "x"  # type: ignore[misc]
    assert hash(d) == hash(Descriptor.from_wire(FULL))
    assert pickle.loads(pickle.dumps(d)) == d
    assert copy.deepcopy(d) == d
    assert "raw" not in repr(d)


def test_text_length_follows_len_unit() -> None:
    text = "hi 😀"  # one astral character: one code point, two UTF-16 units
    assert Descriptor.from_wire(wire(len_unit="chars")).text_length(text) == 4
    assert Descriptor.from_wire(wire(len_unit="utf16")).text_length(text) == 5


def test_split_text_uses_limit_and_unit() -> None:
    d = Descriptor.from_wire(wire(len_unit="utf16", max_message_length=4))
    assert d.split_text("😀😀😀") == ["😀😀", "😀"]
    assert d.fits("😀😀") and not d.fits("😀😀a")
    chars = Descriptor.from_wire(wire(len_unit="chars", max_message_length=4))
    assert chars.split_text("😀😀😀") == ["😀😀😀"]


def test_shared_gives_one_copy_of_equal_descriptors() -> None:
    first = shared(Descriptor.from_wire(dict(FULL)))
    again = shared(Descriptor.from_wire(dict(FULL)))
    assert again is first  # every relay of the process holds this one
    other = shared(Descriptor.from_wire({**FULL, "label": "Telegram 2"}))
    assert other is not first and other.label == "Telegram 2"
    # Unknown keys are part of equality: a descriptor differing only there is its own.
    extra = shared(Descriptor.from_wire({**FULL, "future_field": 1}))
    assert extra is not first and extra.raw["future_field"] == 1


def test_shared_keeps_a_bounded_number_the_oldest_forgotten() -> None:
    kept = [
        shared(Descriptor.from_wire({**FULL, "label": f"churn {i}"}))
        for i in range(SHARED_DESCRIPTORS + 10)
    ]
    oldest = Descriptor.from_wire({**FULL, "label": "churn 0"})
    assert shared(oldest) is oldest  # forgotten: a new one is kept in its place
    newest = Descriptor.from_wire({**FULL, "label": f"churn {SHARED_DESCRIPTORS + 9}"})
    assert shared(newest) is kept[-1]


# --- live cards (issue 21) -------------------------------------------------------------

MINIMAL_WIRE: dict[str, Any] = {"contract_version": 1, "platform": "slack"}


@pytest.mark.parametrize(
    ("keys", "live"),
    [
        ({"supports_draft_streaming": True, "supported_ops": ["send", "draft"]}, True),
        ({"supports_draft_streaming": True}, False),  # the legacy set has no draft
        ({"supports_draft_streaming": True, "supported_ops": []}, False),
        ({"supports_draft_streaming": False, "supported_ops": ["draft"]}, False),
        ({"supports_draft_streaming": "yes", "supported_ops": ["draft"]}, False),
    ],
)
def test_live_cards_need_the_flag_and_the_op(keys: dict[str, Any], live: bool) -> None:
    assert Descriptor.from_wire({**MINIMAL_WIRE, **keys}).live_cards is live


@pytest.mark.parametrize(
    ("platform", "value", "field", "is_message"),
    [
        ("slack", None, None, True),  # absent: the platform decides
        (" Slack ", None, None, True),
        ("telegram", None, None, False),
        ("slack", False, False, False),  # the connector's word wins
        ("discord", True, True, True),
        ("slack", "true", None, True),  # not a JSON boolean: absent
    ],
)
def test_stream_is_message(
    platform: str, value: Any, field: bool | None, is_message: bool
) -> None:
    wire: dict[str, Any] = {**MINIMAL_WIRE, "platform": platform}
    if value is not None:
        wire["draft_stream_is_message"] = value
    descriptor = Descriptor.from_wire(wire)
    assert descriptor.draft_stream_is_message is field
    assert descriptor.stream_is_message is is_message


def test_decoded_keeps_a_descriptor_by_the_line_it_came_in() -> None:
    line = json.dumps({**FULL, "label": "kept by line"}).encode()
    first = decoded(json.loads(line), line)
    assert first.label == "kept by line"
    assert decoded(json.loads(line), line) is first  # decoded once a process
    # Equal as Python values (1 == True) but another wire, and another descriptor:
    # keyed by the line's bytes, not by equality.
    ones = {**FULL, "label": "kept by line", "supports_edit": 1}
    other = decoded(ones, json.dumps(ones).encode())
    assert other is not first and first.supports_edit and not other.supports_edit
    # Without a line (a frame made in code): decoded every time, then shared.
    assert decoded(json.loads(line)) == first


def test_decoded_keeps_nothing_of_a_bad_descriptor() -> None:
    line = b'{"platform": "", "contract_version": 1}'
    for _ in range(2):
        with pytest.raises(FrameError):
            decoded(json.loads(line), line)
