"""RouteTable and routed_action: per-chat routing metadata (docs/protocol.md,
"Routing metadata")."""

from __future__ import annotations

from typing import Any

import pytest

from trio_relay._core.event import Source
from trio_relay._core.routes import Route, RouteTable, routed_action


def source(chat_id: str = "C1", **fields: Any) -> Source:
    return Source.from_wire({"platform": "discord", "chat_id": chat_id, **fields})


def test_record_and_get() -> None:
    table = RouteTable(10, {"discord": "B1"})
    route = table.record(source(scope_id="G1", user_id="U1", thread_id="T1", profile="p"))
    assert route == Route("discord", "B1", "G1", "U1", "p", "T1")
    assert table.get("C1") == route and "C1" in table and len(table) == 1
    assert table.get("C2") is None


def test_platform_takes_the_identity_spelling_and_guild_alias() -> None:
    table = RouteTable(10, {"discord": "B1"})
    route = table.record(Source.from_wire({"platform": "Discord ", "chat_id": "C", "guild_id": 9}))
    assert route is not None and route.platform == "discord" and route.scope_id == "9"


def test_unknown_platform_and_wire_bot_id() -> None:
    table = RouteTable(10, {"discord": "B1"})
    route = table.record(Source.from_wire({"platform": "slack", "chat_id": "C", "bot_id": "BS"}))
    assert route == Route("slack", "BS")
    assert table.record(Source.from_wire({"platform": "slack", "chat_id": "D"})) == Route("slack")


@pytest.mark.parametrize("wire", [{"platform": "discord"}, {"chat_id": "C1"}, {}])
def test_nothing_to_route_by(wire: dict[str, Any]) -> None:
    table = RouteTable(10)
    assert table.record(Source.from_wire(wire)) is None and len(table) == 0


def test_latest_inbound_wins() -> None:
    table = RouteTable(10)
    table.record(source(user_id="U1"))
    table.record(source(user_id="U2"))
    assert table.get("C1") == Route("discord", user_id="U2")


def test_lru_eviction() -> None:
    table = RouteTable(2)
    table.record(source("A"))
    table.record(source("B"))
    table.get("A")  # A is now more recent than B
    table.record(source("C"))
    assert "A" in table and "C" in table and "B" not in table
    assert len(table) == 2


def test_prime_from_wire_or_source() -> None:
    table = RouteTable(10)
    table.prime({"platform": "discord", "chat_id": "C9", "scope_id": "G"})
    table.prime(source("C8", user_id="U"))
    assert table.get("C9") == Route("discord", scope_id="G")
    assert table.get("C8") == Route("discord", user_id="U")
    table.forget("C9")
    assert table.get("C9") is None


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RouteTable(0)


def test_multi_profile_only_after_a_second_profile() -> None:
    table = RouteTable(10)
    table.record(source("A"))  # no profile at all
    table.record(source("B", profile="alpha"))
    table.record(source("C", profile="alpha"))
    assert not table.multi_profile
    table.record(source("D", profile="beta"))
    assert table.multi_profile
    table.record(source("E", profile="beta"))
    assert table.multi_profile  # sticky


ROUTE = Route("discord", "B1", scope_id="G1", user_id="U1", profile="p")


def test_fills_missing_metadata() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    filled = routed_action(action, ROUTE, multi_profile=False)
    assert filled == {**action, "metadata": {"scope_id": "G1", "user_id": "U1"}}
    assert action == {"op": "send", "chat_id": "C1", "content": "hi"}  # not mutated


def test_never_overwrites_the_caller() -> None:
    action = {"op": "send", "chat_id": "C1", "metadata": {"scope_id": "mine", "x": 1}}
    filled = routed_action(action, ROUTE, multi_profile=True)
    assert filled["metadata"] == {"scope_id": "mine", "x": 1, "user_id": "U1", "profile": "p"}
    explicit_none = {"op": "send", "chat_id": "C1", "metadata": {"user_id": None}}
    assert routed_action(explicit_none, ROUTE, multi_profile=False)["metadata"] == {
        "user_id": None,
        "scope_id": "G1",
    }


def test_profile_only_when_multi_profile() -> None:
    action = {"op": "edit", "chat_id": "C1", "message_id": "m", "content": "x"}
    assert "profile" not in routed_action(action, ROUTE, multi_profile=False)["metadata"]
    assert routed_action(action, ROUTE, multi_profile=True)["metadata"]["profile"] == "p"


def test_nothing_to_add_returns_the_same_object() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    assert routed_action(action, Route("relay"), multi_profile=True) is action
    full = {"op": "send", "chat_id": "C1", "metadata": {"scope_id": "a", "user_id": "b"}}
    assert routed_action(full, ROUTE, multi_profile=False) is full


@pytest.mark.parametrize(
    "action",
    [
        {"op": "follow_up", "session_key": "s", "kind": "k", "content": "c", "chat_id": "C1"},
        {"op": "send", "chat_id": "C1", "metadata": "not an object"},
    ],
)
def test_left_alone(action: dict[str, Any]) -> None:
    assert routed_action(action, ROUTE, multi_profile=True) is action


def test_get_chat_info_is_chat_addressed_too() -> None:
    action = {"op": "get_chat_info", "chat_id": "C1"}
    assert routed_action(action, ROUTE, multi_profile=False)["metadata"] == {
        "scope_id": "G1",
        "user_id": "U1",
    }
