"""Secrets never leak, and tokens survive clock skew within their TTL.

One relay lives a full, eventful life with ``UpgradeAuth("gw", SECRET)`` while *every*
logger of the process (the relay's, the reference connector's, trio-websocket's and
wsproto's) records at DEBUG: reconnects after a reset, a 4401 "expired", an upgrade
refused with 4401, a failed dial, a failing handler, a malformed frame, caller mistakes,
a revocation (4401 after the handshake, then the fresh token refused). Every bearer
token the relay mints is known: the relay's injected wall clock records each reading,
and a token is a pure function of the credentials and that reading. Then neither the secret,
nor any token, nor any token's signature may appear in:

- any log record, formatted with its arguments, exception text and stack;
- ``repr`` of the relay, its config, its auth, its stats, any outcome;
- ``str`` or ``repr`` of any exception the relay raised to the caller.

A second relay with a *wrong* secret is refused at the upgrade; its secret and tokens
must not leak either (the connector's verification path logs no token).
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import trio
import trio.testing

import trio_relay
from trio_relay import (
    MessageEvent,
    Outcome,
    RelayConfig,
    RelayRevoked,
    State,
    UpgradeAuth,
)
from trio_relay._core.token import mint_token, verify_token
from trio_relay.testing import open_connector

SECRET = "S3CRET-9f1c2e7a-never-print-me"
WRONG_SECRET = "WR0NG-5b0d8c44-never-print-me-either"
SEND = {"op": "send", "chat_id": "C1", "content": "hi"}

FORMATTER = logging.Formatter(
    "%(asctime)s %(levelname)s %(name)s %(pathname)s:%(lineno)d %(message)s", validate=True
)


class Everything(logging.Handler):
    """Formats and keeps every record of every logger, at every level."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.loggers: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.loggers.add(record.name)
        self.texts.append(FORMATTER.format(record))
        # The raw parts too, in case some handler formats them differently.
        self.texts.append(f"{record.msg!r} {record.args!r}")


@pytest.fixture
def everything() -> Iterator[Everything]:
    handler = Everything()
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    # Some loggers may carry their own level: open them all up for the test.
    touched = []
    for name in ("trio_relay", "trio_relay.testing.connector", "trio-websocket", "wsproto"):
        logger = logging.getLogger(name)
        touched.append((logger, logger.level))
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for logger, level in touched:
            logger.setLevel(level)


class WallClock:
    """The relay's wall clock (``time.time``), passed as ``RelayConfig(wall_clock=...)``.

    The relay reads it once per token it mints, and a token is a pure function of the
    credentials and that reading, so :meth:`tokens` gives every token it minted.
    """

    def __init__(self) -> None:
        self.readings: list[float] = []

    def __call__(self) -> float:
        now = time.time()
        self.readings.append(now)
        return now

    def tokens(self, auth: UpgradeAuth) -> list[str]:
        return [
            mint_token(auth.gateway_id, auth.secret, ttl=auth.token_ttl, now=now)
            for now in self.readings
        ]


def forbidden(secrets: list[str], tokens: list[str]) -> list[str]:
    """The secrets, the tokens, and each token's decoded form and signature."""
    out = list(secrets)
    for token in tokens:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        signature = raw.rsplit(":", 1)[1]
        out += [token, raw, signature]
    return out


def assert_absent(needles: list[str], haystacks: list[str], where: str) -> None:
    for needle in needles:
        for text in haystacks:
            assert needle not in text, f"{needle[:12]}... leaked in {where}: {text[:300]}"


async def eventually(condition: Any, seconds: float = 60) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.01)


async def test_no_secret_or_token_leaks_through_a_full_life(
    autojump_clock: trio.testing.MockClock, everything: Everything
) -> None:
    auth = UpgradeAuth("gw", SECRET)
    clock, other_clock = WallClock(), WallClock()
    config = RelayConfig(close_timeout=0.2, max_message_bytes=4096, wall_clock=clock)
    raised: list[BaseException] = []
    outcomes: list[Outcome] = []
    failed_once: set[str] = set()

    async def on_message(event: MessageEvent) -> None:
        if event.message_id not in failed_once:
            failed_once.add(str(event.message_id))
            raise RuntimeError(f"handler failed for {event.message_id}")

    async def expect_raise(awaitable: Any) -> None:
        try:
            await awaitable
        except Exception as exc:
            raised.append(exc)
        else:  # pragma: no cover
            raise AssertionError("expected an exception")

    async with open_connector(secrets={"gw": SECRET}) as connector:
        async with trio_relay.open_relay(
            connector.url, auth=auth, on_message=on_message, config=config
        ) as relay:
            await relay.wait_connected(5)
            outcomes.append(await relay.request(SEND))
            # Caller mistakes.
            await expect_raise(relay.request({**SEND, "content": "x" * 5000}))
            await expect_raise(relay.request({"chat_id": "C1"}))
            await expect_raise(relay.request(SEND, platform="nowhere"))
            # A failing handler (logged with its traceback), then its redelivery.
            connector.buffer_inbound(
                {"text": "t", "message_id": "m1",
                 "source": {"platform": "relay", "chat_id": "C1"}},
                gateway_id="gw",
            )
            await eventually(lambda: relay.stats.handler_failures == 1)
            # A malformed frame (logged with a sample of it).
            await connector.inject_raw('{"type": "nonsense"}\n')
            # A reset: reconnect with a fresh token; the delivery is replayed.
            await connector.abort()
            await eventually(lambda: relay.stats.connects == 2)
            await eventually(lambda: relay.stats.delivered == 1)
            # 4401 "expired": an ordinary reconnect.
            await connector.close(4401, "expired")
            await eventually(lambda: relay.stats.connects == 3)
            # An upgrade refused with 4401 (provisioning race), then accepted.
            connector.refuse_upgrades(1)
            await connector.close(1011, "overload")
            await eventually(lambda: relay.stats.connects == 4)
            # A failed dial: the connector is gone for a while.
            await connector.stop()
            await eventually(lambda: relay.stats.dial_failures >= 2)
            outcomes.append(await relay.request(SEND))  # not connected
            await expect_raise(relay.wait_connected(timeout=0.5))  # TimeoutError
            await connector.start()
            await eventually(lambda: relay.state is State.CONNECTED)
            outcomes.append(await relay.request(SEND))
            # Revocation: 4401 after the handshake, then the fresh token is refused.
            connector.revoke("gw")
            await eventually(lambda: relay.state is State.REVOKED)
            outcomes.append(await relay.request(SEND))
            await expect_raise(relay.wait_connected())  # RelayRevoked
            assert isinstance(raised[-1], RelayRevoked)
            snapshots = [repr(relay), str(relay), repr(relay.stats), repr(relay.descriptors)]
        await expect_raise(relay.wait_connected())  # RelayClosed
        outcomes.append(await relay.request(SEND))  # closing

        # A gateway with the wrong secret: refused at every upgrade.
        wrong = UpgradeAuth("gw", WRONG_SECRET)
        other_config = replace(config, wall_clock=other_clock)
        async with trio_relay.open_relay(connector.url, auth=wrong, config=other_config) as other:
            await eventually(lambda: other.stats.dials >= 3)
            snapshots += [repr(other), repr(other.stats)]

    minted = clock.tokens(auth) + other_clock.tokens(wrong)
    assert verify_token(minted[0], {"gw": SECRET}, now=time.time()).ok  # real tokens
    assert len(minted) >= 8  # one per dial: several lives' worth of tokens
    # One token per dial that got as far as the upgrade (a refused TCP connect never
    # needs one).
    assert len(minted) == relay.stats.dials - relay.stats.dial_failures + other.stats.dials
    assert any(s.refused == "unauthorized" for s in connector.sessions)
    assert {"trio_relay", "trio_relay.testing.connector", "trio-websocket"} <= everything.loggers

    needles = forbidden([SECRET, WRONG_SECRET], minted)
    assert_absent(needles, everything.texts, "a log record")
    assert_absent(needles, snapshots, "a repr")
    assert_absent(needles, [repr(config), repr(auth), str(auth), repr(wrong)], "config/auth")
    assert_absent(needles, [repr(o) for o in outcomes], "an outcome")
    texts = [f"{type(e).__name__}: {e!s} {e!r}" for e in raised]
    assert_absent(needles, texts, "an exception")
    assert {type(e).__name__ for e in raised} >= {
        "ValueError", "TypeError", "TimeoutError", "RelayRevoked", "RelayClosed",
    }
    assert "gw" in repr(auth)  # the id is not secret; it helps to see it


def test_auth_validation_errors_do_not_echo_the_secret() -> None:
    for kwargs in (
        {"gateway_id": "", "secret": SECRET},
        {"gateway_id": "g:w", "secret": SECRET},
        {"gateway_id": "gw", "secret": SECRET, "token_ttl": -1},
    ):
        with pytest.raises(ValueError) as info:
            UpgradeAuth(**kwargs)  # type: ignore[arg-type]
        assert SECRET not in str(info.value) and SECRET not in repr(info.value)


# --- clock skew and TTL ---------------------------------------------------------------


AUTH = UpgradeAuth("gw", SECRET)
CONFIG = RelayConfig(close_timeout=0.2)


class SkewedClock:
    """The connector's wall clock, ``skew`` seconds off ours (settable)."""

    def __init__(self, skew: float) -> None:
        self.skew = skew

    def __call__(self) -> float:
        return time.time() + self.skew


@pytest.mark.parametrize("skew", [-3600.0, -60.0, 0.0, 60.0, 290.0])
async def test_a_connector_clock_off_by_less_than_the_ttl_accepts(
    autojump_clock: trio.testing.MockClock, skew: float
) -> None:
    """A connector whose clock is ahead by less than the TTL (300 s) still accepts our
    tokens; one behind us accepts them too (they just look young)."""
    async with (
        open_connector(secrets={"gw": SECRET}, clock=SkewedClock(skew)) as connector,
        trio_relay.open_relay(connector.url, auth=AUTH, config=CONFIG) as relay,
    ):
        await relay.wait_connected(5)
        assert relay.stats.dial_failures == 0
        assert (await relay.request(SEND)).success


async def test_a_clock_ahead_by_more_than_the_ttl_reads_expired_never_revoked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Beyond the TTL the connector closes 4401 "expired": the relay keeps dialling with
    backoff, each dial with a freshly minted token, and never counts it as revocation.
    Once the clocks agree again, the next dial connects. (A longer ``token_ttl`` is
    the remedy for clocks that drift this far.)"""
    clock = SkewedClock(400.0)
    ours = WallClock()
    config = replace(CONFIG, wall_clock=ours)
    async with (
        open_connector(secrets={"gw": SECRET}, clock=clock) as connector,
        trio_relay.open_relay(connector.url, auth=AUTH, config=config) as relay,
    ):
        await eventually(lambda: relay.stats.dials >= 4)
        assert relay.state is State.CONNECTING
        assert {s.refused for s in connector.sessions} == {"expired"}
        assert relay.stats.last_close_code == 4401
        clock.skew = 0.0
        await relay.wait_connected(120)
        assert (await relay.request(SEND)).success
    assert len(ours.readings) == relay.stats.dials  # one token per dial


async def test_a_longer_ttl_rides_out_the_same_skew(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long_lived = UpgradeAuth("gw", SECRET, token_ttl=900)
    async with (
        open_connector(secrets={"gw": SECRET}, clock=SkewedClock(400.0)) as connector,
        trio_relay.open_relay(connector.url, auth=long_lived, config=CONFIG) as relay,
    ):
        await relay.wait_connected(5)
        assert relay.stats.dial_failures == 0
