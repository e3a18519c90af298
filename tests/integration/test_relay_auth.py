"""Upgrade authentication and every 4401 path of docs/protocol.md ("Close codes").

The real client against the reference connector with ``secrets={"gw": "secret"}``,
under the autojump clock (all times are mock time). The rules:

- 4401 before any descriptor: a provisioning race, retried with backoff;
- 4401 "expired": never a revocation, an ordinary reconnect;
- 4401 (other) after a handshake: one immediate redial with a fresh token; a second
  4401 on that connection, or the fresh token refused at upgrade, is terminal.
"""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing
from relay_support import LADDER, SEND, Ceiling, Watch, bearer_tokens

from trio_relay import (
    Relay,
    RelayConfig,
    RelayRevoked,
    State,
    UpgradeAuth,
    open_relay,
)
from trio_relay._core.token import verify_token
from trio_relay.testing import ReferenceConnector, open_connector

SECRETS = {"gw": "secret"}
EXACT = RelayConfig(rng=Ceiling())
"""Every backoff wait is exactly its ceiling."""
AUTH = UpgradeAuth("gw", "secret")


@pytest.fixture
def watch() -> Watch:
    return Watch()


async def assert_revoked_for_good(relay: Relay, connector: ReferenceConnector) -> None:
    """REVOKED is terminal: no dial ever again, requests fail at once with a definite
    "revoked", ``wait_connected`` raises :class:`RelayRevoked`."""
    assert relay.state is State.REVOKED
    dials, sessions = relay.stats.dials, len(connector.sessions)
    connector.unrevoke("gw")  # even a connector that would take us again is not dialled
    await trio.sleep(10 * RelayConfig().backoff_max)
    assert relay.stats.dials == dials
    assert len(connector.sessions) == sessions
    assert relay.state is State.REVOKED

    start = trio.current_time()
    outcome = await relay.request(SEND)
    assert (outcome.success, outcome.ambiguous, outcome.code) == (False, False, "revoked")
    assert trio.current_time() == start
    with pytest.raises(RelayRevoked), trio.fail_after(60):
        await relay.wait_connected()
    with pytest.raises(RelayRevoked):
        await relay.wait_connected(timeout=5)
    assert trio.current_time() == start


# --- 4401 before any descriptor ------------------------------------------------------


async def test_4401_before_any_descriptor_is_retried_with_backoff(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    refusals = 3
    async with open_connector(secrets=SECRETS) as connector:
        connector.refuse_upgrades(refusals, 4401, "unauthorized")
        async with watch.open_relay(connector.url, auth=AUTH, config=EXACT) as relay:
            with trio.fail_after(60):
                await relay.wait_connected()
            assert [s.refused for s in connector.sessions] == ["unauthorized"] * refusals + [None]
            gaps = [b - a for a, b in zip(watch.dials, watch.dials[1:], strict=False)]
            assert gaps == list(LADDER[:refusals])  # never connected: the ladder from rung 1
            assert relay.stats.dials == refusals + 1
            await watch.wait_state(State.CONNECTED)
            await watch.settle()
            assert State.REVOKED not in watch.states
            assert watch.states == [State.CONNECTED]  # never left CONNECTING before that
            outcome = await relay.request(SEND)
            assert outcome.success, outcome


# --- 4401 "expired" ------------------------------------------------------------------


async def test_4401_expired_after_handshake_is_an_ordinary_reconnect(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    drops = 4
    async with (
        open_connector(secrets=SECRETS) as connector,
        watch.open_relay(connector.url, auth=AUTH, config=EXACT) as relay,
    ):
        closed_at: list[float] = []
        with trio.fail_after(120):
            for n in range(1, drops + 1):
                await connector.wait_session(n)
                await watch.wait_state(State.CONNECTED, n)
                await connector.close(4401, "expired")
                closed_at.append(trio.current_time())
            await watch.wait_state(State.CONNECTED, drops + 1)

        waits = [dial - closed for closed, dial in zip(closed_at, watch.dials[1:], strict=True)]
        # Backoff, not the one-shot fresh-token redial (each link died young: the ladder).
        assert waits == list(LADDER[:drops])
        await watch.settle()
        assert State.REVOKED not in watch.states
        assert relay.state is State.CONNECTED
        assert relay.stats.last_close_code == 4401
        assert relay.stats.last_close_reason == "expired"
        assert relay.stats.dials == drops + 1


# --- 4401 (other) after a handshake --------------------------------------------------

SLOW_FIRST = RelayConfig(backoff_first_delay=5.0)
"""An ordinary first redial waits 5 s here, so "immediate" cannot be the ladder's."""


async def test_4401_after_handshake_redials_once_at_once_then_serves(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    async with (
        open_connector(secrets=SECRETS) as connector,
        watch.open_relay(connector.url, auth=AUTH, config=SLOW_FIRST) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        struck_at = trio.current_time()
        await connector.close(4401, "unauthorized")
        with trio.fail_after(5):
            await watch.wait_state(State.CONNECTED, 2)
        assert watch.dials[1] == struck_at  # no backoff delay at all
        await watch.settle()
        assert watch.states == [State.CONNECTED, State.RECONNECTING, State.CONNECTED]

        # The redial presented a token of its own, minted for it, and valid.
        tokens = bearer_tokens(connector)
        assert len(tokens) == 2
        for token in tokens:
            assert token is not None
            assert verify_token(token, SECRETS, now=time.time()).ok

        # Normal service on the re-dialled connection, for a good while.
        outcome = await relay.request(SEND)
        assert outcome.success, outcome
        await trio.sleep(3 * RelayConfig().ping_timeout)
        assert relay.state is State.CONNECTED
        assert relay.stats.dials == 2
        outcome = await relay.request(SEND)
        assert outcome.success, outcome


@pytest.mark.parametrize(
    ("reason", "revoked"),
    [("unauthorized", True), ("revoked", True), ("expired", False)],
)
async def test_second_4401_on_the_redialled_connection(
    autojump_clock: trio.testing.MockClock, watch: Watch, reason: str, revoked: bool
) -> None:
    """A second 4401 on the connection dialled after the first strike is terminal,
    unless it says "expired" (which never means revocation)."""
    async with (
        open_connector(secrets=SECRETS) as connector,
        watch.open_relay(connector.url, auth=AUTH, config=SLOW_FIRST) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        await connector.close(4401, "unauthorized")
        with trio.fail_after(5):
            await watch.wait_state(State.CONNECTED, 2)
        await trio.sleep(1)  # the handshake is well behind us
        await connector.close(4401, reason)
        if revoked:
            with trio.fail_after(5):
                await watch.wait_state(State.REVOKED)
            assert relay.stats.dials == 2
            assert relay.stats.last_close_code == 4401
            assert relay.stats.last_close_reason == reason
            await assert_revoked_for_good(relay, connector)
        else:
            with trio.fail_after(60):
                await watch.wait_state(State.CONNECTED, 3)
            await watch.settle()
            assert State.REVOKED not in watch.states


async def test_fresh_token_refused_at_upgrade_revokes(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    async with (
        open_connector(secrets=SECRETS) as connector,
        watch.open_relay(connector.url, auth=AUTH, config=SLOW_FIRST) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        revoked_at = trio.current_time()
        # Closes the live session with 4401 "revoked"; upgrades are refused from now on
        # with 4401 "unauthorized".
        connector.revoke("gw")
        with trio.fail_after(5):
            await watch.wait_state(State.REVOKED)
        assert [s.refused for s in connector.sessions] == [None, "unauthorized"]
        assert connector.sessions[0].close_code == 4401
        assert connector.sessions[0].close_reason == "revoked"
        assert len(watch.dials) == 2
        assert watch.dials[1] == revoked_at  # the one redial went out at once
        await watch.settle()
        assert watch.states == [State.CONNECTED, State.RECONNECTING, State.REVOKED]
        await assert_revoked_for_good(relay, connector)


async def test_strikes_do_not_carry_over_an_ordinary_drop(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """4401 -> fresh redial -> that connection drops for an ordinary reason -> the next
    connection's 4401 is a first strike again, not a revocation."""
    async with (
        open_connector(secrets=SECRETS) as connector,
        watch.open_relay(connector.url, auth=AUTH) as relay,
    ):
        with trio.fail_after(120):
            await relay.wait_connected()
            await connector.close(4401, "unauthorized")  # strike 1
            await watch.wait_state(State.CONNECTED, 2)
            await connector.abort()  # ordinary drop of the fresh-token connection
            await watch.wait_state(State.CONNECTED, 3)
            struck_at = trio.current_time()
            await connector.close(4401, "unauthorized")  # strike 1 again
            await watch.wait_state(State.CONNECTED, 4)
        assert watch.dials[3] == struck_at
        await watch.settle()
        assert State.REVOKED not in watch.states
        assert relay.stats.dials == 4


# --- tokens --------------------------------------------------------------------------


class WallClock:
    """A wall clock the test moves: shared by the client's minting and the connector's
    verification, so that a suspend can be simulated."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_redial_after_a_long_suspend_mints_a_fresh_token(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """The token of the first dial has long expired when the link drops after a
    suspend; the redial must carry a new one, or the connector answers "expired"
    forever."""
    wall = WallClock()
    # The client mints with its wall_clock, the connector checks against its clock=:
    # both follow the same moved wall clock.
    suspend = 12 * AUTH.token_ttl
    async with open_connector(secrets=SECRETS, clock=wall) as connector:
        config = RelayConfig(wall_clock=wall)
        async with watch.open_relay(connector.url, auth=AUTH, config=config) as relay:
            with trio.fail_after(5):
                await relay.wait_connected()
            await trio.sleep(suspend)
            wall.now += suspend
            await connector.abort()
            with trio.fail_after(60):
                await watch.wait_state(State.CONNECTED, 2)
            assert relay.stats.dials == 2
            assert [s.refused for s in connector.sessions] == [None, None]
            first, second = bearer_tokens(connector)
            assert first is not None and second is not None
            assert verify_token(first, SECRETS, now=wall.now).reason == "expired"
            assert verify_token(second, SECRETS, now=wall.now).ok
            outcome = await relay.request(SEND)
            assert outcome.success, outcome


async def test_no_auth_sends_no_authorization_header(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector:
        async with open_relay(connector.url) as relay:
            with trio.fail_after(5):
                await relay.wait_connected()
            await connector.abort()
            with trio.fail_after(60):
                await connector.wait_session(2)
        assert bearer_tokens(connector) == [None, None]


async def test_auth_sends_a_valid_bearer_token_on_every_dial(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector(secrets=SECRETS) as connector:
        async with open_relay(connector.url, auth=AUTH) as relay:
            with trio.fail_after(5):
                await relay.wait_connected()
            await connector.abort()
            with trio.fail_after(60):
                await connector.wait_session(2)
            assert [s.gateway_id for s in connector.sessions] == ["gw", "gw"]
        tokens = bearer_tokens(connector)
        assert len(tokens) == 2
        for token in tokens:
            assert token is not None
            check = verify_token(token, SECRETS, now=time.time())
            assert (check.ok, check.gateway_id) == (True, "gw")
