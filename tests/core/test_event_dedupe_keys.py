"""Dedupe keys of a MessageEvent: one stable key per message, whatever the spelling of
its platform or ids, and none (fail open) when an id is missing (docs/protocol.md,
"Inbound event")."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from trio_relay._core.event import MessageEvent, normalize_platform


def event(**fields: Any) -> MessageEvent:
    return MessageEvent.from_wire(fields)


def keyed(platform: Any = "slack", chat_id: Any = "C1", message_id: Any = "m1") -> str | None:
    return event(
        message_id=message_id, source={"platform": platform, "chat_id": chat_id}
    ).dedupe_key


def test_dedupe_key_format() -> None:
    assert keyed() == "slack:C1:m1"
    assert keyed("telegram", -100123, 55) == "telegram:-100123:55"


@pytest.mark.parametrize(
    "missing",
    [
        {"platform": None},
        {"platform": ""},
        {"platform": "   "},
        {"platform": 5},
        {"chat_id": None},
        {"chat_id": ""},
        {"chat_id": True},
        {"message_id": None},
        {"message_id": ""},
        {"message_id": 1.5},
    ],
)
def test_dedupe_key_fails_open(missing: dict[str, Any]) -> None:
    assert keyed(**missing) is None


def test_platform_spelling_is_one_key() -> None:
    assert keyed("Slack ") == keyed("slack") == keyed(" SLACK") == "slack:C1:m1"


def test_distinct_platforms_never_collide() -> None:
    assert keyed("slack") != keyed("discord")
    # Ids that contain the separator must not alias another (chat, message) pair.
    assert keyed("a", "b:c", "d") != keyed("a", "b", "c:d")
    assert keyed("a:b", "c", "d") != keyed("a", "b:c", "d")
    assert keyed("a", "b%3Ac", "d") != keyed("a", "b:c", "d")


def test_ids_with_separator_keep_a_stable_key() -> None:
    assert keyed("matrix", "!room:example.org", "$ev") == "matrix:!room%3Aexample.org:$ev"
    assert keyed("matrix", "!room:example.org", "$ev") == keyed(
        "matrix", "!room:example.org", "$ev"
    )


class Platform(str, enum.Enum):  # noqa: UP042 (the str mixin users write, not StrEnum)
    SLACK = "slack"
    DISCORD = "Discord"


class PlainPlatform(enum.Enum):
    SLACK = "Slack"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("slack", "slack"),
        ("Slack ", "slack"),
        ("\tTELEGRAM\n", "telegram"),
        (Platform.SLACK, "slack"),
        (Platform.DISCORD, "discord"),
        (PlainPlatform.SLACK, "slack"),
        (None, ""),
        ("", ""),
    ],
)
def test_normalize_platform(value: Any, expected: str) -> None:
    assert normalize_platform(value) == expected


def test_normalize_platform_str_enum() -> None:
    members = {"SLACK": " Slack"}
    strenum = enum.StrEnum("P", members)  # type: ignore[attr-defined,misc,unused-ignore]
    assert normalize_platform(strenum.SLACK) == "slack"


def test_enum_and_string_share_a_dedupe_key() -> None:
    e = event(message_id="m1", source={"platform": "Slack ", "chat_id": "C1"})
    assert e.dedupe_key == f"{normalize_platform(Platform.SLACK)}:C1:m1"


def test_the_source_message_id_falls_back_to_the_events() -> None:
    top_only = event(message_id=7, source={"platform": "slack", "chat_id": "C1"})
    assert top_only.source.message_id == "7" and top_only.message_id == "7"
    both = event(message_id="m1", source={"platform": "slack", "chat_id": "C1", "message_id": "s1"})
    assert both.source.message_id == "s1" and both.message_id == "m1"
    neither = event(source={"platform": "slack", "chat_id": "C1", "message_id": True})
    assert neither.source.message_id is None and neither.dedupe_key is None


def test_the_dedupe_key_takes_the_events_id_first_then_the_sources() -> None:
    source_only = event(source={"platform": "slack", "chat_id": "C1", "message_id": "s1"})
    assert source_only.message_id is None
    assert source_only.dedupe_key == "slack:C1:s1"
    both = event(message_id="m1", source={"platform": "slack", "chat_id": "C1", "message_id": "s1"})
    assert both.dedupe_key == "slack:C1:m1"
