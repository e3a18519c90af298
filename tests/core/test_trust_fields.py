"""The trust fields of an inbound source (docs/protocol.md, "Trust fields"), decoded
strictly: only JSON ``true``/``false`` count; anything else is ``None`` (unknown, so a
room control fails closed) and is reported as bad input. Frames in, fields out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_relay import MessageEvent, Source
from trio_relay._core.event import TRUST_FIELDS, rejected_trust_fields

ABSENT = object()

# (the value on the wire, what the field decodes to, whether it is bad input)
CASES: list[tuple[Any, bool | None, bool]] = [
    (True, True, False),
    (False, False, False),
    (ABSENT, None, False),
    (None, None, True),  # null is not a boolean: the connector sent something else
    (0, None, True),
    (1, None, True),
    (0.0, None, True),
    ("true", None, True),
    ("false", None, True),
    ("", None, True),
    ([], None, True),
    ([True], None, True),
    ({}, None, True),
    ({"value": True}, None, True),
]


def wire_source(**fields: Any) -> dict[str, Any]:
    source: dict[str, Any] = {"platform": "slack", "chat_id": "C1", "user_id": "U1"}
    source.update({k: v for k, v in fields.items() if v is not ABSENT})
    # Through JSON, as the connector's line arrives: the values are what JSON can carry.
    decoded: dict[str, Any] = json.loads(json.dumps(source))
    return decoded


@pytest.mark.parametrize("field", TRUST_FIELDS)
@pytest.mark.parametrize(("value", "decoded", "bad"), CASES)
def test_each_trust_field_is_decoded_strictly(
    field: str, value: Any, decoded: bool | None, bad: bool
) -> None:
    wire = wire_source(**{field: value})
    source = Source.from_wire(wire)
    assert getattr(source, field) is decoded
    assert rejected_trust_fields(wire) == ([field] if bad else [])
    for other in TRUST_FIELDS:
        if other != field:
            assert getattr(source, other) is None  # not sent: unknown


def test_the_fields_are_independent_and_reported_in_order() -> None:
    wire = wire_source(is_bot="no", message_is_edit=False, one_to_one_verified=1)
    source = Source.from_wire(wire)
    assert (source.is_bot, source.message_is_edit, source.one_to_one_verified) == (
        None,
        False,
        None,
    )
    assert rejected_trust_fields(wire) == ["is_bot", "one_to_one_verified"]


def test_an_event_carries_its_source_trust_fields() -> None:
    event = MessageEvent.from_wire(
        {
            "text": "hi",
            "message_id": "m1",
            "source": wire_source(is_bot=True, message_is_edit=True, one_to_one_verified=False),
        }
    )
    assert event.source.is_bot is True
    assert event.source.message_is_edit is True
    assert event.source.one_to_one_verified is False


def test_a_source_built_by_hand_knows_nothing() -> None:
    # The default is "not sent": a control reading it fails closed.
    source = Source(platform="slack", chat_id="C1")
    assert (source.is_bot, source.message_is_edit, source.one_to_one_verified) == (
        None,
        None,
        None,
    )
