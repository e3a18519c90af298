"""Typed frames (docs/protocol.md, "Frames, gateway to connector" and "Frames, connector
to gateway"): wire round trips and required fields."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    GATEWAY_FRAMES,
    DescriptorFrame,
    Frame,
    FrameError,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)

DESCRIPTOR = {"contract_version": 1, "platform": "slack", "label": "Slack"}
EVENT = {"text": "hi", "message_id": "m1", "source": {"platform": "slack", "chat_id": "C1"}}
FORWARD = {"platform": "slack", "botId": "B1", "method": "POST", "path": "/x", "headers": []}

# (frame, its wire object): both directions must agree exactly.
CASES: list[tuple[Frame, dict[str, Any]]] = [
    (Hello("slack", "B1"), {"type": "hello", "platform": "slack", "botId": "B1"}),
    (
        Hello("slack", "B1", [{"name": "/ask"}]),
        {
            "type": "hello",
            "platform": "slack",
            "botId": "B1",
            "command_manifest": [{"name": "/ask"}],
        },
    ),
    (Hello("relay", ""), {"type": "hello", "platform": "relay", "botId": ""}),
    (
        Outbound("ab12", {"op": "send", "chat_id": "C1", "content": "hi"}),
        {
            "type": "outbound",
            "requestId": "ab12",
            "action": {"op": "send", "chat_id": "C1", "content": "hi"},
        },
    ),
    (
        Outbound("ab12", {"op": "typing", "chat_id": "C1"}, "slack", "B1"),
        {
            "type": "outbound",
            "requestId": "ab12",
            "action": {"op": "typing", "chat_id": "C1"},
            "platform": "slack",
            "botId": "B1",
        },
    ),
    (
        Interrupt("sess", "user asked"),
        {"type": "interrupt", "session_key": "sess", "reason": "user asked"},
    ),
    # docs/protocol.md, "Frames, gateway to connector": reason is "string or null", so
    # null is written, not omitted.
    (Interrupt("sess"), {"type": "interrupt", "session_key": "sess", "reason": None}),
    (GoingIdle(), {"type": "going_idle"}),
    (InboundAck("buf-1"), {"type": "inbound_ack", "bufferId": "buf-1"}),
    (DescriptorFrame(DESCRIPTOR), {"type": "descriptor", "descriptor": DESCRIPTOR}),
    (InboundFrame(EVENT), {"type": "inbound", "event": EVENT}),
    (InboundFrame(EVENT, "b7"), {"type": "inbound", "event": EVENT, "bufferId": "b7"}),
    (
        OutboundResult("ab12", {"success": True, "message_id": "m9"}),
        {
            "type": "outbound_result",
            "requestId": "ab12",
            "result": {"success": True, "message_id": "m9"},
        },
    ),
    (OutboundResult("ab12"), {"type": "outbound_result", "requestId": "ab12", "result": {}}),
    (
        InterruptInbound("sess", "C1"),
        {"type": "interrupt_inbound", "session_key": "sess", "chat_id": "C1"},
    ),
    (GoingIdleAck(), {"type": "going_idle_ack"}),
    (PassthroughFrame(FORWARD), {"type": "passthrough_forward", "forward": FORWARD}),
    (
        PassthroughFrame(FORWARD, "b9"),
        {"type": "passthrough_forward", "forward": FORWARD, "bufferId": "b9"},
    ),
]
IDS = [f"{type(f).__name__}-{i}" for i, (f, _) in enumerate(CASES)]


@pytest.mark.parametrize(("frame", "wire"), CASES, ids=IDS)
def test_to_wire(frame: Frame, wire: dict[str, Any]) -> None:
    assert frame.to_wire() == wire


@pytest.mark.parametrize(("frame", "wire"), CASES, ids=IDS)
def test_from_wire(frame: Frame, wire: dict[str, Any]) -> None:
    assert type(frame).from_wire(wire) == frame


@pytest.mark.parametrize(("frame", "wire"), CASES, ids=IDS)
def test_round_trip(frame: Frame, wire: dict[str, Any]) -> None:
    assert type(frame).from_wire(frame.to_wire()) == frame
    assert type(frame).from_wire(wire).to_wire() == wire


def test_every_frame_type_is_covered() -> None:
    covered = {type(frame) for frame, _ in CASES}
    assert covered == set(CONNECTOR_FRAMES.values()) | set(GATEWAY_FRAMES.values())


def test_registries_match_contract() -> None:
    assert set(CONNECTOR_FRAMES) == {
        "descriptor",
        "inbound",
        "outbound_result",
        "interrupt_inbound",
        "going_idle_ack",
        "passthrough_forward",
    }
    assert set(GATEWAY_FRAMES) == {"hello", "outbound", "interrupt", "going_idle", "inbound_ack"}
    for registry in (CONNECTOR_FRAMES, GATEWAY_FRAMES):
        for type_name, cls in registry.items():
            assert type_name == cls.TYPE
            assert cls.__name__ and issubclass(cls, Frame)
    # A frame type belongs to exactly one direction.
    assert not set(CONNECTOR_FRAMES) & set(GATEWAY_FRAMES)


def test_type_is_not_an_instance_field() -> None:
    # TYPE is a ClassVar: it must not become a constructor argument or a compared field.
    for cls in (*CONNECTOR_FRAMES.values(), *GATEWAY_FRAMES.values()):
        assert "TYPE" not in {f.name for f in dataclasses.fields(cls)}


def test_from_wire_ignores_the_type_and_unknown_keys() -> None:
    wire = {"type": "outbound_result", "requestId": "r", "result": {}, "extra": 1}
    assert OutboundResult.from_wire(wire) == OutboundResult("r", {})


def test_result_missing_or_null_reads_as_empty_object() -> None:
    assert OutboundResult.from_wire({"requestId": "r"}).result == {}
    assert OutboundResult.from_wire({"requestId": "r", "result": None}).result == {}


def test_missing_result_default_not_shared() -> None:
    a = OutboundResult.from_wire({"requestId": "a"})
    b = OutboundResult.from_wire({"requestId": "b"})
    assert a.result is not b.result


def test_hello_bot_id_defaults_to_empty() -> None:
    assert Hello.from_wire({"platform": "relay"}) == Hello("relay", "")


def test_numeric_chat_id_and_buffer_id_become_strings() -> None:
    assert InterruptInbound.from_wire({"session_key": "s", "chat_id": -100123}).chat_id == "-100123"
    assert InboundAck.from_wire({"bufferId": 7}) == InboundAck("7")
    assert InboundFrame.from_wire({"event": {}, "bufferId": 0}).buffer_id == "0"
    assert PassthroughFrame.from_wire({"forward": {}, "bufferId": 12}).buffer_id == "12"


def test_optional_fields_absent_from_wire_when_unset() -> None:
    assert "command_manifest" not in Hello("p", "b").to_wire()
    assert {"platform", "botId"}.isdisjoint(Outbound("r", {"op": "send"}).to_wire())
    assert "bufferId" not in InboundFrame({}).to_wire()
    assert "bufferId" not in PassthroughFrame({}).to_wire()


@pytest.mark.parametrize(
    ("cls", "wire", "match"),
    [
        (Hello, {}, "platform"),
        (Hello, {"platform": 1, "botId": "B"}, "platform"),
        (Hello, {"platform": "p", "botId": 5}, "botId"),
        (Hello, {"platform": "p", "command_manifest": {"a": 1}}, "command_manifest"),
        (Outbound, {"action": {"op": "send"}}, "requestId"),
        (Outbound, {"requestId": 5, "action": {"op": "send"}}, "requestId"),
        (Outbound, {"requestId": "r"}, "action"),
        (Outbound, {"requestId": "r", "action": ["send"]}, "action"),
        (Outbound, {"requestId": "r", "action": {}}, "op"),
        (Outbound, {"requestId": "r", "action": {"op": 1}}, "op"),
        (Outbound, {"requestId": "r", "action": {"op": "send"}, "platform": 1}, "platform"),
        (Outbound, {"requestId": "r", "action": {"op": "send"}, "botId": 1}, "botId"),
        (Interrupt, {}, "session_key"),
        (Interrupt, {"session_key": None}, "session_key"),
        (Interrupt, {"session_key": "s", "reason": 5}, "reason"),
        (InboundAck, {}, "bufferId"),
        (InboundAck, {"bufferId": None}, "bufferId"),
        (InboundAck, {"bufferId": True}, "bufferId"),
        (InboundAck, {"bufferId": 1.5}, "bufferId"),
        (InboundAck, {"bufferId": ["b"]}, "bufferId"),
        (DescriptorFrame, {}, "descriptor"),
        (DescriptorFrame, {"descriptor": "slack"}, "descriptor"),
        (DescriptorFrame, {"descriptor": None}, "descriptor"),
        (InboundFrame, {}, "event"),
        (InboundFrame, {"event": []}, "event"),
        (InboundFrame, {"event": {}, "bufferId": False}, "bufferId"),
        (InboundFrame, {"event": {}, "bufferId": {}}, "bufferId"),
        (OutboundResult, {}, "requestId"),
        (OutboundResult, {"requestId": 12}, "requestId"),
        (OutboundResult, {"requestId": "r", "result": [1]}, "result"),
        (OutboundResult, {"requestId": "r", "result": "ok"}, "result"),
        (InterruptInbound, {"chat_id": "C"}, "session_key"),
        (InterruptInbound, {"session_key": "s"}, "chat_id"),
        (InterruptInbound, {"session_key": "s", "chat_id": True}, "chat_id"),
        (InterruptInbound, {"session_key": "s", "chat_id": 1.5}, "chat_id"),
        (PassthroughFrame, {}, "forward"),
        (PassthroughFrame, {"forward": "x"}, "forward"),
        (PassthroughFrame, {"forward": {}, "bufferId": 2.0}, "bufferId"),
    ],
)
def test_required_fields(cls: type[Frame], wire: dict[str, Any], match: str) -> None:
    with pytest.raises(FrameError, match=match):
        cls.from_wire(wire)


def test_frame_error_is_a_value_error() -> None:
    assert issubclass(FrameError, ValueError)


def test_frames_are_immutable_values() -> None:
    frame = Hello("slack", "B1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.platform = "x"  # type: ignore[misc]
    assert frame == Hello("slack", "B1")
    assert hash(GoingIdle()) == hash(GoingIdle())
