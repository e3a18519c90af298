"""The relevance policy: declared once per start to the reference connector's
``POST /relay/policy``, with the bearer token; fail-soft."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.lowlevel
from relay_support import SEND

import trio_relay
from trio_relay import RelevancePolicy, State, UpgradeAuth
from trio_relay.testing import open_connector

SECRET = "policy-secret-value"
AUTH = UpgradeAuth("gw", SECRET)
POLICY = RelevancePolicy("slack", require_address=True, free_response_scopes=["C9"])


async def test_declared_once_after_the_handshake_with_the_bearer() -> None:
    async with open_connector(secrets={"gw": SECRET}) as connector:
        async with trio_relay.open_relay(connector.url, auth=AUTH, policy=POLICY) as relay:
            with trio.fail_after(10):
                await connector.routes.wait_policies(1)
            # A redial is not a new start: the policy is not sent again.
            await connector.abort()
            await connector.wait_session(2)
            await relay.wait_connected(timeout=10)
            assert (await relay.request(SEND)).success
        assert connector.routes.policies == [("gw", {
            "platform": "slack", "requireAddress": True,
            "freeResponseScopes": ["C9"], "allowOtherBots": False,
        })]  # fmt: skip
        [request] = connector.routes.requests
        assert (request.path, request.had_bearer, request.gateway_id) == (
            "/relay/policy", True, "gw"
        )


async def test_a_refused_policy_is_a_warning_and_the_relay_runs_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_connector(secrets={"gw": SECRET}) as connector:
        connector.routes.fail_next(403)
        with caplog.at_level(logging.WARNING, logger="trio_relay"):
            async with trio_relay.open_relay(connector.url, auth=AUTH, policy=POLICY) as relay:
                await relay.wait_connected(timeout=10)
                with trio.fail_after(10):
                    await connector.routes.wait_requests(1)
                assert (await relay.request(SEND)).success
                assert relay.state is State.CONNECTED
    assert connector.routes.policies == []
    assert "relevance policy for slack refused with HTTP 403" in caplog.text
    assert SECRET not in caplog.text


async def test_a_server_error_is_retried() -> None:
    async with open_connector(secrets={"gw": SECRET}) as connector:
        connector.routes.fail_next(503)
        async with trio_relay.open_relay(connector.url, auth=AUTH, policy=POLICY):
            with trio.fail_after(10):
                await connector.routes.wait_policies(1)
    assert [r.status for r in connector.routes.requests] == [503, 204]


async def test_an_all_default_policy_is_not_sent() -> None:
    # An absence, so with a witness: a second relay with a real policy connects after the
    # first one is up and has made a round trip; once its declaration has arrived, the
    # first one's (sent, if at all, right after its own handshake) would be there too.
    async with open_connector(secrets={"gw": SECRET, "gw2": SECRET}) as connector:
        quiet = UpgradeAuth("gw2", SECRET)
        default = RelevancePolicy("slack")
        async with trio_relay.open_relay(connector.url, auth=quiet, policy=default) as first:
            await first.wait_connected(timeout=10)
            assert (await first.request(SEND)).success
            async with trio_relay.open_relay(connector.url, auth=AUTH, policy=POLICY):
                with trio.fail_after(10):
                    await connector.routes.wait_policies(1)
    assert [gateway for gateway, _ in connector.routes.policies] == ["gw"]
    assert [r.gateway_id for r in connector.routes.requests] == ["gw"]


async def test_closed_before_connecting_sends_nothing() -> None:
    async with open_connector() as connector:
        port = connector.port
    # Nothing listens any more: the relay never connects, and leaves quietly.
    async with trio_relay.open_relay(f"http://127.0.0.1:{port}", policy=POLICY):
        await trio.lowlevel.checkpoint()
