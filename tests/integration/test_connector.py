"""The reference connector (trio_relay.testing), driven by a raw trio-websocket client.

Everything runs on real loopback sockets: the connector is the server side of every
other test in this suite, so what is checked here is that it speaks the contract and
that each fault it injects looks, on the wire, like the real thing.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from connector_support import dial, hello, line, outbound
from trio_websocket import ConnectionRejected

from trio_relay._core.frames import Interrupt, Outbound
from trio_relay._core.token import mint_token
from trio_relay.testing import Session, open_connector

NOW = 1_700_000_000.0
SECRETS = {"gw1": "s3cret", "gw2": "other"}


def _clock() -> float:
    return NOW


def token(gateway_id: str = "gw1", *, secret: str | None = None, ttl: float = 300) -> str:
    return mint_token(gateway_id, secret or SECRETS[gateway_id], ttl=ttl, now=NOW)


# --- handshake ----------------------------------------------------------------------


async def test_hello_gets_one_descriptor_each_with_overrides() -> None:
    overrides = {"discord": {"markdown_dialect": "discord", "supported_ops": ["send", "react"]}}
    async with open_connector(descriptors=overrides) as connector, dial(connector) as peer:
        assert connector.url == f"http://127.0.0.1:{connector.port}"
        await peer.send(hello("slack"), hello("discord"))
        first, second = await peer.frames(2)
        # Every op of the protocol unless overridden, as `trio-relay connector` says.
        ops = set(first["descriptor"].pop("supported_ops"))
        assert {"send", "edit", "typing", "follow_up", "prompt", "send_media", "draft"} <= ops
        assert first == {
            "type": "descriptor",
            "descriptor": {
                "contract_version": 1,
                "platform": "slack",
                "label": "Slack",
                "max_message_length": 4096,
                "supports_draft_streaming": False,
                "supports_edit": True,
                "supports_threads": False,
                "markdown_dialect": "plain",
                "len_unit": "chars",
            },
        }
        assert second["descriptor"]["platform"] == "discord"
        assert second["descriptor"]["markdown_dialect"] == "discord"
        assert second["descriptor"]["supported_ops"] == ["send", "react"]
        session = await connector.wait_session()
        assert session is connector.current
        assert connector.handshakes == 1
        assert [h.platform for h in session.hellos] == ["slack", "discord"]
        assert session.gateway_id == "anonymous"


async def test_wrong_path_is_refused_with_404() -> None:
    async with open_connector() as connector:
        with pytest.raises(ConnectionRejected) as info:
            async with dial(connector, path="/other"):
                pass  # pragma: no cover
        assert info.value.status_code == 404
        assert connector.sessions == []


# --- requests -----------------------------------------------------------------------


async def test_batched_outbound_all_answered_in_one_message() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await peer.send(outbound("r1"), outbound("r2"), outbound("r3"))
        results = await peer.frames(3)
        assert [r["requestId"] for r in results] == ["r1", "r2", "r3"]
        assert [r["result"] for r in results] == [
            {"success": True, "message_id": f"m{n}"} for n in (1, 2, 3)
        ]
        # Three results, ready in one dispatch, leave as one WebSocket message.
        assert peer.messages == 2  # the descriptor, then one batch
        assert [o.request_id for o in connector.outbound] == ["r1", "r2", "r3"]
        assert connector.outbound_count == 3


async def test_outbound_split_across_messages_is_reassembled() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        whole = outbound("split")
        await peer.send(whole[:10])
        await peer.send(whole[10:])
        assert (await peer.frame())["requestId"] == "split"


async def test_custom_handler_result_none_and_failure() -> None:
    async def handler(session: Session, frame: Outbound) -> dict[str, Any] | None:
        op = frame.action["op"]
        if op == "typing":
            return None  # no reply at all
        if frame.action.get("content") == "boom":
            raise ValueError("kaput")
        await trio.lowlevel.checkpoint()  # handlers may await; they run off the reader task
        return {"success": True, "echo": op, "gateway": session.gateway_id}

    async with open_connector(outbound_handler=handler) as connector, dial(connector) as peer:
        await peer.send(
            outbound("t", "typing"), outbound("b", content="boom"), outbound("e", "edit")
        )
        got = {f["requestId"]: f["result"] for f in await peer.frames(2)}
        assert got["e"] == {"success": True, "echo": "edit", "gateway": "anonymous"}
        assert got["b"]["success"] is False and "kaput" in got["b"]["error"]
        assert "t" not in got
        assert connector.current is not None  # a failing handler never ends the session


async def test_withhold_then_release() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        connector.withhold_results()
        await peer.send(outbound("a"), outbound("b"))
        await connector.wait_outbound(2)
        assert [reply.request_id for _, reply in connector.results.held] == ["a", "b"]
        connector.release_results()
        assert [f["requestId"] for f in await peer.frames(2)] == ["a", "b"]
        await peer.send(outbound("c"))  # no longer withheld
        assert (await peer.frame())["requestId"] == "c"


async def test_drop_results() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        connector.drop_results()
        await peer.send(outbound("lost"))
        await connector.wait_outbound(1)
        connector.drop_results(False)
        await peer.send(outbound("kept"))
        assert (await peer.frame())["requestId"] == "kept"  # "lost" never comes
        assert connector.results_dropped == 1


async def test_delay_results() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        connector.delay_results(0.2)
        start = trio.current_time()
        await peer.send(outbound("slow"))
        assert (await peer.frame())["requestId"] == "slow"
        assert trio.current_time() - start >= 0.2


# --- authentication -----------------------------------------------------------------


async def test_auth_ok_sets_gateway_id() -> None:
    async with (
        open_connector(secrets=SECRETS, clock=_clock) as connector,
        dial(connector, token=token("gw2")) as peer,
    ):
        await peer.handshake()
        assert (await connector.wait_session()).gateway_id == "gw2"


@pytest.mark.parametrize(
    ("presented", "reason"),
    [
        (token("gw1", ttl=0), None),  # never expires
        (mint_token("gw1", "s3cret", ttl=10, now=NOW - 60), "expired"),
        (token("gw1", secret="forged"), "unauthorized"),
        (mint_token("nobody", "x", ttl=10, now=NOW), "unauthorized"),
        ("not-a-token", "unauthorized"),
        (None, "unauthorized"),
    ],
)
async def test_auth_verdicts(presented: str | None, reason: str | None) -> None:
    async with (
        open_connector(secrets=SECRETS, clock=_clock) as connector,
        dial(connector, token=presented) as peer,
    ):
        if reason is None:
            await peer.handshake()
        else:
            assert await peer.closed() == (4401, reason)
            assert connector.sessions[0].refused == reason
            assert connector.current is None and connector.handshakes == 0


async def test_revoke_closes_sessions_and_refuses_upgrades() -> None:
    async with open_connector(secrets=SECRETS, clock=_clock) as connector:
        async with (
            dial(connector, token=token("gw1")) as peer,
            dial(connector, token=token("gw2")) as other,
        ):
            await peer.handshake()
            await other.handshake()
            connector.revoke("gw1")
            assert await peer.closed() == (4401, "revoked")
            assert connector.sessions[0].close_code == 4401
            assert connector.current is connector.sessions[1]  # gw2 unaffected
        async with dial(connector, token=token("gw1")) as peer:
            assert await peer.closed() == (4401, "unauthorized")


async def test_refuse_upgrades_then_accept() -> None:
    async with open_connector() as connector:
        connector.refuse_upgrades(2, 4401, "provisioning")
        for _ in range(2):
            async with dial(connector) as peer:
                assert await peer.closed() == (4401, "provisioning")
        async with dial(connector) as peer:
            await peer.handshake()
        assert len(connector.sessions) == 3
        assert connector.handshakes == 1


# --- durable delivery ---------------------------------------------------------------


async def test_buffered_inbound_replayed_until_acked() -> None:
    async with open_connector() as connector:
        b1 = connector.buffer_inbound({"text": "one"})
        b2 = connector.buffer_passthrough({"platform": "slack", "method": "POST"})
        for _ in range(2):  # replayed on every handshake while unacked
            async with dial(connector) as peer:
                await peer.handshake()
                first, second = await peer.frames(2)
                assert first == {"type": "inbound", "event": {"text": "one"}, "bufferId": b1}
                assert second["type"] == "passthrough_forward" and second["bufferId"] == b2
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.frames(2)
            await peer.send(line({"type": "inbound_ack", "bufferId": b1}))
            await connector.wait_acks(1)
            b3 = connector.buffer_inbound({"text": "live"})  # sent at once when connected
            assert (await peer.frame())["bufferId"] == b3
        assert connector.pending() == [b2, b3]
        async with dial(connector) as peer:
            await peer.handshake()
            assert [f["bufferId"] for f in await peer.frames(2)] == [b2, b3]
            await peer.send(
                line({"type": "inbound_ack", "bufferId": b2}),
                line({"type": "inbound_ack", "bufferId": b3}),
            )
            await connector.wait_acks(3)
        assert connector.acks == [b1, b2, b3]
        assert connector.pending() == []
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.send(outbound("probe"))  # nothing is replayed before this answer
            assert (await peer.frame())["requestId"] == "probe"


async def test_buffers_are_per_gateway() -> None:
    async with open_connector(secrets=SECRETS, clock=_clock) as connector:
        mine = connector.buffer_inbound({"text": "for gw2"}, gateway_id="gw2")
        connector.buffer_inbound({"text": "for gw1"}, gateway_id="gw1")
        async with dial(connector, token=token("gw2")) as peer:
            await peer.handshake()
            assert (await peer.frame())["bufferId"] == mine
            await peer.send(outbound("probe"))
            assert (await peer.frame())["requestId"] == "probe"


async def test_going_idle_acked_and_buffered_only() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await peer.send(line({"type": "going_idle"}))
        assert await peer.frame() == {"type": "going_idle_ack"}
        connector.buffer_inbound({"text": "later"})  # idle: not pushed live
        await peer.send(outbound("probe"))
        assert (await peer.frame())["requestId"] == "probe"
        assert len(connector.pending()) == 1


async def test_live_inbound_and_interrupt() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await connector.send_inbound({"text": "hi"})
        await connector.send_interrupt("sess", "C1")
        assert await peer.frames(2) == [
            {"type": "inbound", "event": {"text": "hi"}},
            {"type": "interrupt_inbound", "session_key": "sess", "chat_id": "C1"},
        ]
        await peer.send(line({"type": "interrupt", "session_key": "sess", "reason": None}))
        await connector.wait_until(lambda: len(connector.received) == 2)
        assert connector.received[1] == Interrupt("sess", None)
