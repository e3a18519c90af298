"""The reference connector's idempotency keys (``open_connector(idempotency_window=)``),
driven by a raw trio-websocket gateway: the descriptor field, a repeat answered from
the first attempt (after it, when it is still running), a conflict, one store per
gateway id, and the two bounds (the window, the cap on keys)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from connector_support import Peer, dial, hello, outbound

from trio_relay._core.frames import Outbound
from trio_relay._core.token import mint_token
from trio_relay.testing import Session, open_connector

NOW = 1_700_000_000.0
SECRETS = {"gw1": "s3cret", "gw2": "other"}


def _token(gateway_id: str) -> str:
    return mint_token(gateway_id, SECRETS[gateway_id], ttl=300, now=NOW)


async def _result(peer: Peer, request_id: str, key: str, **fields: Any) -> dict[str, Any]:
    await peer.send(outbound(request_id, idempotency_key=key, **fields))
    frame = await peer.frame()
    assert frame["type"] == "outbound_result" and frame["requestId"] == request_id
    result: dict[str, Any] = frame["result"]
    return result


async def test_the_descriptor_advertises_the_window_only_when_set() -> None:
    async with open_connector(idempotency_window=90) as connector, dial(connector) as peer:
        descriptor = await peer.handshake()
        assert descriptor["descriptor"]["idempotency_window_s"] == 90
    async with open_connector() as connector, dial(connector) as peer:
        descriptor = await peer.handshake()
        assert "idempotency_window_s" not in descriptor["descriptor"]
        assert connector.keys is None


async def test_a_repeat_gets_the_first_result_and_is_not_carried_out_again() -> None:
    async with open_connector(idempotency_window=90) as connector, dial(connector) as peer:
        await peer.handshake()
        first = await _result(peer, "r1", "k1")
        again = await _result(peer, "r2", "k1")
        other = await _result(peer, "r3", "k2")
        assert first == {"success": True, "message_id": "m1"}
        assert again == {"success": True, "message_id": "m1", "replayed": True}
        assert other == {"success": True, "message_id": "m3"}
        assert [e.text for e in connector.transcript("C1")] == ["hi", "hi"]  # k1 once, k2
        assert connector.keys is not None
        assert (connector.keys.carried_out, connector.keys.replays) == (2, 1)


async def test_without_the_window_keys_are_ignored() -> None:
    async with open_connector() as connector, dial(connector) as peer:
        await peer.handshake()
        await _result(peer, "r1", "k1")
        again = await _result(peer, "r2", "k1")
        assert "replayed" not in again
        assert len(connector.transcript("C1")) == 2


async def test_a_repeat_with_another_action_is_refused_as_a_conflict() -> None:
    async with open_connector(idempotency_window=90) as connector, dial(connector) as peer:
        await peer.handshake()
        await _result(peer, "r1", "k1")
        conflict = await _result(peer, "r2", "k1", content="not the same")
        assert conflict["success"] is False and conflict["code"] == "idempotency_conflict"
        assert "k1" not in conflict["error"]
        assert [e.text for e in connector.transcript("C1")] == ["hi"]


async def test_a_malformed_key_is_refused() -> None:
    async with open_connector(idempotency_window=90) as connector, dial(connector) as peer:
        await peer.handshake()
        refused = await _result(peer, "r1", "no spaces allowed")
        assert refused["code"] == "invalid_action" and "64 characters" in refused["error"]
        assert connector.transcript("C1") == []


async def test_keys_are_per_gateway_id() -> None:
    async with (
        open_connector(idempotency_window=90, secrets=SECRETS, clock=lambda: NOW) as connector,
        dial(connector, token=_token("gw1")) as one,
        dial(connector, token=_token("gw2")) as two,
    ):
        await one.handshake()
        await two.handshake()
        first = await _result(one, "r1", "same-key")
        second = await _result(two, "r2", "same-key")
        assert "replayed" not in first and "replayed" not in second
        assert first["message_id"] != second["message_id"]


async def test_a_repeat_of_a_running_attempt_waits_for_its_result() -> None:
    release = trio.Event()
    calls: list[str] = []

    async def slow_platform(session: Session, frame: Outbound) -> dict[str, Any]:
        calls.append(frame.request_id)
        await release.wait()
        return {"success": True, "message_id": "slow-1"}

    async with (
        open_connector(idempotency_window=90, outbound_handler=slow_platform) as connector,
        dial(connector) as peer,
    ):
        await peer.handshake()
        await peer.send(outbound("r1", idempotency_key="k1"), outbound("r2", idempotency_key="k1"))
        await connector.wait_outbound(2)
        await trio.testing.wait_all_tasks_blocked()
        assert calls == ["r1"]  # the repeat did not reach the platform
        release.set()
        results = {frame["requestId"]: frame["result"] for frame in await peer.frames(2)}
        assert results == {
            "r1": {"success": True, "message_id": "slow-1"},
            "r2": {"success": True, "message_id": "slow-1", "replayed": True},
        }


async def test_a_key_is_forgotten_after_the_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(idempotency_window=30) as connector, dial(connector) as peer:
        await peer.handshake()
        await _result(peer, "r1", "k1")
        await trio.sleep(29)
        assert (await _result(peer, "r2", "k1")).get("replayed") is True
        await trio.sleep(2)  # 31 s after the first
        late = await _result(peer, "r3", "k1")
        assert "replayed" not in late
        assert len(connector.transcript("C1")) == 2


async def test_the_store_holds_at_most_max_keys_oldest_evicted_first() -> None:
    async with (
        open_connector(idempotency_window=90, idempotency_max_keys=2) as connector,
        dial(connector) as peer,
    ):
        await peer.handshake()
        for n, key in enumerate(("k1", "k2", "k3")):
            await _result(peer, f"r{n}", key)
        assert connector.keys is not None
        assert len(connector.keys) == 2 and connector.keys.evicted == 1
        assert (await _result(peer, "r3", "k3")).get("replayed") is True
        assert "replayed" not in await _result(peer, "r4", "k1")  # k1 went first


@pytest.mark.parametrize(("window", "keys"), [(0, 10), (-1, 10), (10, 0)])
def test_bad_bounds_are_refused_when_given(window: float, keys: int) -> None:
    with pytest.raises(ValueError, match="idempotency_"):
        open_connector(idempotency_window=window, idempotency_max_keys=keys)


async def test_a_repeat_sent_twice_in_one_message_is_answered_twice() -> None:
    async with open_connector(idempotency_window=90) as connector, dial(connector) as peer:
        await peer.send(hello())
        await peer.frame()
        await peer.send(outbound("r1", idempotency_key="k1"), outbound("r2", idempotency_key="k1"))
        results = [frame["result"] for frame in await peer.frames(2)]
        assert results[0] == {"success": True, "message_id": "m1"}
        assert results[1] == {**results[0], "replayed": True}
        assert len(connector.transcript("C1")) == 1
