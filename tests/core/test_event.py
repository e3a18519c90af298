"""MessageEvent, Source and Media from the wire (docs/protocol.md, "Inbound event").

Their dedupe keys: ``test_event_dedupe_keys.py``."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from trio_relay._core.event import (
    CHAT_TYPES,
    MESSAGE_TYPES,
    Media,
    MessageEvent,
    Source,
)
from trio_relay._core.frames import FrameError

FULL: dict[str, Any] = {
    "text": "hello",
    "message_type": "photo",
    "message_id": "m1",
    "reply_to_message_id": "m0",
    "media_urls": ["https://cdn.example/a.jpg"],
    "media": [
        {
            "url": "https://cdn.example/a.jpg",
            "mime": "image/jpeg",
            "kind": "photo",
            "size": 1234,
            "filename": "a.jpg",
            "caption": "look",
        }
    ],
    "source": {
        "platform": "telegram",
        "chat_id": "-100123",
        "chat_type": "group",
        "chat_name": "Team",
        "user_id": "42",
        "user_name": "Ada",
        "thread_id": "7",
        "scope_id": "S1",
        "profile": "work",
        "is_bot": False,
    },
    "edited": True,
}


def event(**fields: Any) -> MessageEvent:
    return MessageEvent.from_wire(fields)


def source(**fields: Any) -> Source:
    return MessageEvent.from_wire({"source": fields}).source


def test_full_event() -> None:
    e = MessageEvent.from_wire(FULL)
    assert e.text == "hello"
    assert e.message_type == "photo"
    assert e.message_id == "m1"
    assert e.reply_to_message_id == "m0"
    assert e.media_urls == ("https://cdn.example/a.jpg",)
    assert e.media == (
        Media("https://cdn.example/a.jpg", "image/jpeg", "photo", 1234, "a.jpg", "look"),
    )
    s = e.source
    assert (s.platform, s.chat_id, s.chat_type, s.chat_name) == (
        "telegram",
        "-100123",
        "group",
        "Team",
    )
    assert (s.user_id, s.user_name, s.thread_id, s.scope_id, s.profile) == (
        "42",
        "Ada",
        "7",
        "S1",
        "work",
    )
    assert e.raw == FULL
    assert s.raw == FULL["source"]


def test_empty_event_defaults() -> None:
    e = MessageEvent.from_wire({})
    assert e.text == ""
    assert e.message_type == "text"
    assert e.message_id is None and e.reply_to_message_id is None
    assert e.media_urls == () and e.media == ()
    assert e.source == Source()
    assert e.source.platform == "" and e.source.chat_type == "dm"
    assert e.dedupe_key is None


@pytest.mark.parametrize("obj", [None, [], "text", 5])
def test_not_an_object_is_a_frame_error(obj: Any) -> None:
    with pytest.raises(FrameError, match="object"):
        MessageEvent.from_wire(obj)
    with pytest.raises(FrameError, match="object"):
        Source.from_wire(obj)


@pytest.mark.parametrize("value", [None, 5, ["hi"], {"t": "hi"}, True])
def test_text_defaults_to_empty(value: Any) -> None:
    assert event(text=value).text == ""


@pytest.mark.parametrize("kind", sorted(MESSAGE_TYPES))
def test_known_message_types_kept(kind: str) -> None:
    assert event(message_type=kind).message_type == kind


@pytest.mark.parametrize("value", [None, "gif", "TEXT", "", 3, ["photo"], {"a": 1}])
def test_unknown_message_type_is_text(value: Any) -> None:
    assert event(message_type=value).message_type == "text"


def test_message_types_match_contract() -> None:
    assert (
        frozenset(
            {
                "text",
                "photo",
                "video",
                "audio",
                "voice",
                "document",
                "sticker",
                "location",
                "command",
            }
        )
        == MESSAGE_TYPES
    )
    assert frozenset({"dm", "group", "channel", "thread", "forum"}) == CHAT_TYPES


@pytest.mark.parametrize("key", ["message_id", "reply_to_message_id"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "abc"),
        ("", ""),
        (123, "123"),
        (-5, "-5"),
        (0, "0"),
        (True, None),
        (False, None),
        (1.5, None),
        (None, None),
        (["1"], None),
    ],
)
def test_message_ids(key: str, value: Any, expected: str | None) -> None:
    assert getattr(event(**{key: value}), key) == expected


def test_media_urls_keep_strings_only() -> None:
    assert event(media_urls=["a", 1, None, "b", ["c"]]).media_urls == ("a", "b")
    assert event(media_urls="a").media_urls == ()
    assert event(media_urls={"a": 1}).media_urls == ()


def test_media_entries() -> None:
    e = event(
        media=[
            {"url": "u1"},
            "u2",  # not an object
            {"mime": "image/png"},  # no url
            {"url": ""},
            {"url": 5},
            None,
            {"url": "u3", "mime": 1, "kind": ["x"], "size": "12", "filename": 3, "caption": None},
            {"url": "u4", "size": True},
            {"url": "u5", "size": 0, "kind": "voice"},
        ]
    )
    assert e.media == (
        Media("u1"),
        Media("u3"),
        Media("u4"),
        Media("u5", kind="voice", size=0),
    )
    assert event(media={"url": "u"}).media == ()
    assert Media.from_wire("u") is None


@pytest.mark.parametrize("key", ["chat_id", "user_id", "thread_id", "scope_id"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [("C1", "C1"), (-100123, "-100123"), (True, None), (2.5, None), (None, None), ({}, None)],
)
def test_source_ids(key: str, value: Any, expected: str | None) -> None:
    assert getattr(source(**{key: value}), key) == expected


@pytest.mark.parametrize("kind", sorted(CHAT_TYPES))
def test_chat_types_kept(kind: str) -> None:
    assert source(chat_type=kind).chat_type == kind


@pytest.mark.parametrize("value", [None, "private", "DM", "", 1, ["group"]])
def test_unknown_chat_type_is_dm(value: Any) -> None:
    assert source(chat_type=value).chat_type == "dm"


def test_source_platform_defaults_to_empty() -> None:
    assert source(platform=5).platform == ""
    assert source().platform == ""
    assert source(platform="slack").platform == "slack"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"user_name": "ada", "user_display_name": "Ada L.", "user_handle": "@ada"}, "ada"),
        ({"user_display_name": "Ada L.", "user_handle": "@ada"}, "Ada L."),
        ({"user_handle": "@ada"}, "@ada"),
        ({"user_name": "", "user_display_name": "Ada L."}, "Ada L."),
        ({"user_name": 5, "user_handle": "@ada"}, "@ada"),
        ({}, None),
        ({"user_name": None}, None),
    ],
)
def test_user_name_fallbacks(fields: dict[str, Any], expected: str | None) -> None:
    assert source(**fields).user_name == expected


def test_scope_id_legacy_alias() -> None:
    assert source(guild_id="G1").scope_id == "G1"
    assert source(guild_id=99).scope_id == "99"
    assert source(scope_id="S1", guild_id="G1").scope_id == "S1"
    assert source(scope_id=True, guild_id="G1").scope_id == "G1"
    assert source().scope_id is None


@pytest.mark.parametrize("key", ["chat_name", "profile"])
def test_optional_source_strings(key: str) -> None:
    assert getattr(source(**{key: "x"}), key) == "x"
    assert getattr(source(**{key: 1}), key) is None
    assert getattr(source(), key) is None


@pytest.mark.parametrize("value", [None, "slack", ["x"], 5])
def test_source_not_an_object_is_empty(value: Any) -> None:
    assert event(source=value).source == Source()


# --- unknown fields --------------------------------------------------------------------


def test_unknown_fields_are_attributes() -> None:
    e = MessageEvent.from_wire(FULL)
    assert e.edited is True
    assert e.source.is_bot is False
    assert e.raw["edited"] is True


def test_known_fields_win_over_raw() -> None:
    e = event(text=5, message_type="bogus")
    assert e.text == "" and e.raw["text"] == 5
    assert e.message_type == "text"


def test_missing_attribute_raises_attribute_error() -> None:
    e = event()
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = e.nope
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = e.source.nope
    assert not hasattr(e, "nope")
    assert getattr(e, "nope", "default") == "default"


def test_private_and_dunder_names_are_never_wire_fields() -> None:
    e = event(_private=1, __secret__=2)
    with pytest.raises(AttributeError):
        _ = e._private
    assert not hasattr(e, "__secret__")
    assert e.raw["_private"] == 1


@pytest.mark.parametrize(
    "hostile",
    [
        {"__deepcopy__": 1, "__copy__": 2, "__reduce_ex__": 3},
        {"__setstate__": "x", "__getstate__": "y", "__getnewargs_ex__": "z"},
        {"raw": "shadow", "__dict__": 5, "__class__": 6},
    ],
)
def test_copy_and_pickle_survive_hostile_field_names(hostile: dict[str, Any]) -> None:
    # copy/pickle probe for these names with getattr; answering from raw would hand
    # them a non-callable (or recurse on a half-built instance).
    wire = {**FULL, **hostile, "source": {**FULL["source"], **hostile}}
    e = MessageEvent.from_wire(wire)
    for clone in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert clone == e
        assert clone.edited is True
        assert clone.source.is_bot is False
        assert clone.dedupe_key == e.dedupe_key


def test_dataclass_machinery() -> None:
    e = MessageEvent.from_wire(FULL)
    assert dataclasses.asdict(e)["source"]["chat_id"] == "-100123"
    changed = dataclasses.replace(e, text="edited")
    assert changed.text == "edited" and changed.edited is True
    assert {f.name for f in dataclasses.fields(e)} == {
        "text",
        "message_type",
        "message_id",
        "reply_to_message_id",
        "media_urls",
        "media",
        "source",
        "reply_to",
        "context",
        "context_error",
        "prompt_response",
        "raw",
        "attempt",
    }
    assert e.attempt == 1  # not a wire field: the pipeline sets it per run
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.text = "x"  # type: ignore[misc]
    assert hash(e) == hash(MessageEvent.from_wire(FULL))
    assert "raw" not in repr(e)


def test_raw_is_a_copy() -> None:
    wire: dict[str, Any] = {"text": "a", "source": {"chat_id": "1"}}
    e = MessageEvent.from_wire(wire)
    wire["text"] = "b"
    wire["extra"] = 1
    assert e.raw == {"text": "a", "source": {"chat_id": "1"}}
