"""Routing metadata learned from inbound and filled into outbound, against the
reference connector (which declines a reply to a scoped chat without its scope_id):
docs/protocol.md, "Routing metadata"."""

from __future__ import annotations

from typing import Any

import trio

from trio_relay import Identity, MessageEvent, Relay, RelayConfig, open_relay
from trio_relay._core.codec import encode_frame
from trio_relay._core.frames import Outbound
from trio_relay.testing import ReferenceConnector, open_connector

DISCORD = [Identity("discord", "B1")]


async def handled(relay: Relay, connector: ReferenceConnector, count: int) -> None:
    """Wait until ``count`` deliveries were handled (and so their routes recorded)."""
    with trio.fail_after(5):
        while relay.stats.delivered < count:
            await trio.sleep(0.01)


def wire_line(frame: Outbound) -> str:
    """The frame as the gateway encoded it, with its request id masked."""
    return encode_frame(Outbound("R", frame.action, frame.platform, frame.bot_id))


async def test_reply_carries_the_chats_tenant_and_is_not_declined() -> None:
    seen: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        seen.append(event)

    async with (
        open_connector() as connector,
        open_relay(connector.url, identities=DISCORD, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "hi", user="U7", scope_id="G1")
        await handled(relay, connector, 1)
        assert relay.routes.get("C1") is not None
        outcome = await relay.request({"op": "send", "chat_id": "C1", "content": "yo"})
    assert outcome.success, outcome
    assert seen[0].source.scope_id == "G1"  # the handler ran after the route was kept
    frame = connector.outbound[-1]
    assert frame.platform == "discord" and frame.bot_id == "B1"
    assert frame.action == {
        "op": "send",
        "chat_id": "C1",
        "content": "yo",
        "metadata": {"scope_id": "G1", "user_id": "U7"},
    }


async def test_without_a_route_the_connector_declines() -> None:
    # Both chats' tenants are known to the connector; the relay's one-chat cache
    # forgets C1 when C2 speaks, so its reply to C1 goes out without scope_id.
    async with (
        open_connector() as connector,
        open_relay(
            connector.url, identities=DISCORD, config=RelayConfig(route_cache_size=1)
        ) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "hi", scope_id="G1")
        await handled(relay, connector, 1)
        connector.say("C2", "hi", scope_id="G2")  # evicts C1 (cache of one chat)
        await handled(relay, connector, 2)
        assert relay.routes.get("C1") is None
        declined = await relay.request({"op": "send", "chat_id": "C1", "content": "x"})
        routed = await relay.request({"op": "send", "chat_id": "C2", "content": "x"})
    assert declined.egress_declined and not declined.ambiguous
    assert routed.success


async def test_prime_seeds_a_cold_chat() -> None:
    async with (
        open_connector() as connector,
        open_relay(connector.url, identities=DISCORD) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "hi", scope_id="G1")
        await handled(relay, connector, 1)
        # A restart: the new relay has no routes until primed with the saved source.
        async with open_relay(connector.url, identities=DISCORD) as relay:
            await relay.wait_connected(5)
            relay.routes.prime({"platform": "discord", "chat_id": "C1", "scope_id": "G1"})
            outcome = await relay.request({"op": "typing", "chat_id": "C1"})
            assert relay.descriptor_for("C1") is relay.descriptors["discord"]
    assert outcome.success, outcome
    assert connector.outbound[-1].action["metadata"] == {"scope_id": "G1"}


async def test_caller_values_are_never_overwritten() -> None:
    async with (
        open_connector() as connector,
        open_relay(connector.url, identities=DISCORD) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "hi", user="U1", scope_id="G1")
        await handled(relay, connector, 1)
        action: dict[str, Any] = {
            "op": "send",
            "chat_id": "C1",
            "content": "x",
            "metadata": {"scope_id": "G9", "trace": "t"},
        }
        outcome = await relay.request(action)
    # The caller's scope_id wins (and is declined: it is the wrong tenant).
    assert outcome.egress_declined
    assert connector.outbound[-1].action["metadata"] == {
        "scope_id": "G9",
        "trace": "t",
        "user_id": "U1",
    }
    assert action["metadata"] == {"scope_id": "G9", "trace": "t"}  # not mutated


async def test_single_profile_frames_are_byte_identical() -> None:
    """A chat whose inbound carried no profile gets exactly the frame a gateway that
    knows nothing of profiles sends; a chat whose inbound carried one echoes it, even
    when it is the only profile this gateway has seen (issue 21)."""
    async with open_connector() as connector, open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        relay.routes.prime({"platform": "relay", "chat_id": "A", "user_id": "U", "profile": "main"})
        relay.routes.prime({"platform": "relay", "chat_id": "B", "user_id": "U"})
        for chat in ("A", "B"):
            await relay.request({"op": "send", "chat_id": chat, "content": "x"})
        a, b = connector.outbound[-2:]
        assert a.action["metadata"] == {"user_id": "U", "profile": "main"}
        assert b.action["metadata"] == {"user_id": "U"}
        await relay.request(
            {"op": "send", "chat_id": "A", "content": "x", "metadata": {"profile": "mine"}}
        )
        relay.routes.prime({"platform": "relay", "chat_id": "A", "user_id": "U"})
        await relay.request({"op": "send", "chat_id": "A", "content": "x"})
    mine, a2 = connector.outbound[-2:]
    assert mine.action["metadata"] == {"profile": "mine", "user_id": "U"}  # caller wins
    assert wire_line(a2).replace('"A"', '"B"') == wire_line(b)  # latest had none


async def test_profile_echoed_from_a_real_inbound_of_the_only_profile() -> None:
    """Through the wire: the connector stamps source.profile on an inbound, and the
    reply to that chat carries it although no second profile was ever seen."""
    async def on_message(event: MessageEvent) -> None:
        pass

    async with (
        open_connector() as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        source = {"platform": "relay", "chat_id": "P1", "user_id": "U", "profile": "solo"}
        await connector.send_inbound({"text": "hi", "message_id": "m1", "source": source})
        await handled(relay, connector, 1)
        await relay.request({"op": "send", "chat_id": "P1", "content": "x"})
    assert connector.outbound[-1].action["metadata"] == {"user_id": "U", "profile": "solo"}


async def test_follow_up_gets_no_metadata_and_other_platforms_are_kept() -> None:
    async with open_connector() as connector:
        identities = [Identity("discord", "B1"), Identity("slack", "S1")]
        async with open_relay(connector.url, identities=identities) as relay:
            await relay.wait_connected(5)
            relay.routes.prime(
                {"platform": "slack", "chat_id": "C1", "scope_id": "T1", "profile": "a"}
            )
            relay.routes.prime({"platform": "slack", "chat_id": "C2", "profile": "b"})
            follow = {"op": "follow_up", "session_key": "b:s1", "kind": "k", "content": "c"}
            await relay.request(follow)
            # An explicit other platform: that chat id is another chat; left alone.
            await relay.request({"op": "send", "chat_id": "C1", "content": "x"}, platform="discord")
            await relay.request({"op": "send", "chat_id": "C1", "content": "x"})
    follow_frame, discord_frame, slack_frame = connector.outbound[-3:]
    assert follow_frame.action == follow
    assert discord_frame.platform == "discord" and "metadata" not in discord_frame.action
    assert slack_frame.platform == "slack" and slack_frame.bot_id == "S1"
    assert slack_frame.action["metadata"] == {"scope_id": "T1", "profile": "a"}


async def test_a_platform_we_never_said_hello_for_names_no_envelope() -> None:
    async with open_connector() as connector, open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        relay.routes.prime({"platform": "matrix", "chat_id": "R1", "user_id": "U"})
        outcome = await relay.request({"op": "send", "chat_id": "R1", "content": "x"})
        assert relay.descriptor_for("R1") is relay.descriptors["relay"]  # the default
    assert outcome.success, outcome  # an unknown envelope platform would be refused
    frame = connector.outbound[-1]
    assert frame.platform is None and frame.action["metadata"] == {"user_id": "U"}
