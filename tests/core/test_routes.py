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


def test_profile_follows_the_chats_latest_inbound() -> None:
    """Only one profile ever seen: its chats still echo it (issue 21); a chat whose
    latest inbound dropped the profile stops echoing it."""
    table = RouteTable(10)
    table.record(source("A"))  # no profile at all
    table.record(source("B", profile="alpha"))
    action = {"op": "send", "chat_id": "B", "content": "x"}
    route_b = table.get("B")
    assert route_b is not None
    assert routed_action(action, route_b)["metadata"] == {"profile": "alpha"}
    route_a = table.get("A")
    assert route_a is not None
    assert routed_action(action, route_a) is action  # nothing to add: byte-identical
    table.record(source("B"))  # B's latest inbound carried none
    route_b = table.get("B")
    assert route_b is not None and routed_action(action, route_b) is action


ROUTE = Route("discord", "B1", scope_id="G1", user_id="U1", profile="p")


def test_fills_missing_metadata() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    filled = routed_action(action, ROUTE)
    assert filled == {**action, "metadata": {"scope_id": "G1", "user_id": "U1", "profile": "p"}}
    assert action == {"op": "send", "chat_id": "C1", "content": "hi"}  # not mutated


def test_never_overwrites_the_caller() -> None:
    action = {"op": "send", "chat_id": "C1", "metadata": {"scope_id": "mine", "x": 1}}
    filled = routed_action(action, ROUTE)
    assert filled["metadata"] == {"scope_id": "mine", "x": 1, "user_id": "U1", "profile": "p"}
    explicit_none = {"op": "send", "chat_id": "C1", "metadata": {"user_id": None}}
    assert routed_action(explicit_none, ROUTE)["metadata"] == {
        "user_id": None,
        "scope_id": "G1",
        "profile": "p",
    }


def test_profile_echoed_whenever_the_route_has_one() -> None:
    action = {"op": "edit", "chat_id": "C1", "message_id": "m", "content": "x"}
    assert routed_action(action, ROUTE)["metadata"]["profile"] == "p"
    no_profile = Route("discord", "B1", scope_id="G1", user_id="U1")
    assert "profile" not in routed_action(action, no_profile)["metadata"]
    mine = {**action, "metadata": {"profile": "caller"}}
    assert routed_action(mine, ROUTE)["metadata"]["profile"] == "caller"  # caller wins


def test_nothing_to_add_returns_the_same_object() -> None:
    action = {"op": "send", "chat_id": "C1", "content": "hi"}
    assert routed_action(action, Route("relay")) is action
    full = {
        "op": "send",
        "chat_id": "C1",
        "metadata": {"scope_id": "a", "user_id": "b", "profile": "q"},
    }
    assert routed_action(full, ROUTE) is full


@pytest.mark.parametrize(
    "action",
    [
        {"op": "follow_up", "session_key": "s", "kind": "k", "content": "c", "chat_id": "C1"},
        {"op": "send", "chat_id": "C1", "metadata": "not an object"},
    ],
)
def test_left_alone(action: dict[str, Any]) -> None:
    assert routed_action(action, ROUTE) is action


def test_get_chat_info_is_chat_addressed_too() -> None:
    action = {"op": "get_chat_info", "chat_id": "C1"}
    assert routed_action(action, ROUTE)["metadata"] == {
        "scope_id": "G1",
        "user_id": "U1",
        "profile": "p",
    }
