"""Reconnecting: drops of every kind, the silent peer, and the backoff ladder.

The real client against the reference connector on loopback, under the autojump
clock: every time below is mock time, so "immediate" means no mock time elapsed and a
30-second rule costs milliseconds.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from relay_support import (
    EPSILON,
    LADDER,
    QUICK,
    SEND,
    Ceiling,
    Watch,
    chat_event,
)

from trio_relay import RelayConfig, State
from trio_relay.testing import ReferenceConnector, live_tasks, open_connector

DEFAULTS = RelayConfig()
EXACT = RelayConfig(rng=Ceiling())
"""Every backoff wait is exactly its ceiling."""


@pytest.fixture
def watch() -> Watch:
    return Watch()


async def _drop(connector: ReferenceConnector, code: int | None, reason: str) -> None:
    if code is None:
        await connector.abort()  # a TCP reset: the client sees 1006, no close frame
    else:
        await connector.close(code, reason)


# --- ordinary drops ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "seen_code", "seen_reason"),
    [
        pytest.param(None, "", 1006, None, id="reset-1006"),
        pytest.param(1011, "keepalive ping timeout", 1011, "keepalive ping timeout", id="1011"),
        pytest.param(1000, "bye", 1000, "bye", id="1000"),
        pytest.param(1001, "going away", 1001, "going away", id="1001"),
        pytest.param(4000, "app reset", 4000, "app reset", id="4000"),
        pytest.param(4999, "app other", 4999, "app other", id="4999"),
    ],
)
async def test_ordinary_drop_reconnects_at_once(
    autojump_clock: trio.testing.MockClock,
    watch: Watch,
    code: int | None,
    reason: str,
    seen_code: int,
    seen_reason: str | None,
) -> None:
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        assert relay.state is State.CONNECTED
        # Live past backoff_stable_after, so this is "the first redial after a healthy
        # link": it must go out with no delay at all.
        await trio.sleep(DEFAULTS.backoff_stable_after + 1)
        assert relay.stats.dials == 1

        dropped_at = trio.current_time()
        await _drop(connector, code, reason)
        with trio.fail_after(60):
            await watch.wait_state(State.CONNECTED, 2)
            await connector.wait_session(2)

        await watch.settle()
        assert watch.states == [State.CONNECTED, State.RECONNECTING, State.CONNECTED]
        assert watch.dials[1] - dropped_at == 0.0
        await watch.settle()
        assert watch.entered(State.CONNECTED)[1].at == dropped_at
        stats = relay.stats
        assert stats.dials == 2
        assert stats.connects == 2
        assert sum(stats.drops.values()) == 1
        assert stats.drops["closed by peer"] == 1
        assert stats.last_close_code == seen_code
        assert stats.last_close_reason == seen_reason
        # And the new connection serves requests.
        outcome = await relay.request(SEND)
        assert outcome.success, outcome


async def test_ladder_resets_only_after_a_link_serves_stable_after(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """A link that dies younger than ``backoff_stable_after`` climbs the ladder (the
    first link included: no healthy link is behind it); one that served that long
    resets it, so the redial after it is immediate again."""
    stable_after = DEFAULTS.backoff_stable_after
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=EXACT) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        # 1: lives 1 s -> flapping: the ladder's first rung.
        await trio.sleep(1)
        t = trio.current_time()
        await connector.close(1011, "flap")
        with trio.fail_after(60):
            await connector.wait_session(2)
        assert watch.dials[1] - t == LADDER[0]
        # 2: lives just under stable_after -> the ladder was kept: the second rung.
        await trio.sleep(stable_after - 0.5)
        t = trio.current_time()
        await connector.close(1011, "flap")
        with trio.fail_after(60):
            await connector.wait_session(3)
        assert watch.dials[2] - t == LADDER[1]
        # 3: lives stable_after -> the ladder starts afresh: immediate.
        await trio.sleep(stable_after + 0.25)
        t = trio.current_time()
        await connector.close(1011, "flap")
        with trio.fail_after(60):
            await connector.wait_session(4)
            await watch.wait_state(State.CONNECTED, 4)
        assert watch.dials[3] - t == 0.0
        # 4: and the ladder after it starts from its first rung again.
        await trio.sleep(1)
        t = trio.current_time()
        await connector.close(1011, "flap")
        with trio.fail_after(60):
            await connector.wait_session(5)
        assert watch.dials[4] - t == LADDER[0]
        assert relay.stats.dials == 5


async def test_a_second_drop_soon_after_a_first_is_redialled_at_once(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """Issue 11: the replaced policy kept its ladder for 60 s, so a second drop 10 s
    after a first waited 0.5-1 s. Both links were healthy: both redials are immediate."""
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=EXACT) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        for n in (2, 3):
            await trio.sleep(10.25)
            t = trio.current_time()
            await connector.abort()
            with trio.fail_after(5):
                await watch.wait_state(State.CONNECTED, n)
            assert watch.dials[n - 1] == t
        assert relay.stats.dials == 3


# --- the silent peer -----------------------------------------------------------------


async def test_silent_peer_is_declared_dead_after_ping_timeout(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    interval, timeout = DEFAULTS.ping_interval, DEFAULTS.ping_timeout
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        await trio.sleep(2.5 * interval)  # a few pings answered: alive
        assert relay.state is State.CONNECTED
        silent = connector.current
        assert silent is not None
        # A pong now is the last byte the client will get from this session.
        await relay.ping()
        last_byte = trio.current_time()
        connector.go_silent(silent)

        with trio.fail_after(10 * timeout):
            dropped = await watch.wait_state(State.RECONNECTING)
        silent_for = dropped.at - last_byte
        assert timeout <= silent_for < timeout + interval, silent_for
        assert dropped.cause.startswith("keepalive timeout")
        assert relay.stats.drops["keepalive timeout"] == 1
        assert sum(relay.stats.drops.values()) == 1
        assert relay.stats.last_close_code is None  # no close frame from a stalled peer

        # The stalled session would linger on the connector's side: reset it.
        await connector.abort(silent)
        with trio.fail_after(60):
            await relay.wait_connected()
            await connector.wait_session(2)
        assert watch.dials[1] == dropped.at  # first redial: immediate
        assert relay.stats.dials == 2
        outcome = await relay.request(SEND)
        assert outcome.success, outcome


async def test_busy_peer_that_never_pongs_is_not_dropped(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    interval, timeout = DEFAULTS.ping_interval, DEFAULTS.ping_timeout
    sent = 0
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        session = connector.current
        assert session is not None
        connector.ignore_pings(session)

        async def feed() -> None:
            nonlocal sent
            while True:
                await connector.send_inbound(chat_event("tick", f"m{sent}"), session=session)
                sent += 1
                await trio.sleep(interval / 2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            # The peer really ignores pings: no pong comes back.
            with pytest.raises(TimeoutError):
                await relay.ping(timeout=interval / 2)
            # Count tasks off the ping and feed beats, at the same phase both times.
            await trio.sleep(timeout + interval / 4)
            tasks = len(live_tasks())
            await trio.sleep(4 * timeout)
            # Unanswered pings do not pile up: each waits for its pong only so long.
            assert len(live_tasks()) <= tasks
            nursery.cancel_scope.cancel()

        assert relay.state is State.CONNECTED
        assert relay.stats.dials == 1
        assert sum(relay.stats.drops.values()) == 0
        assert session.is_open
        assert connector.current is session
        assert sent >= 5 * timeout / (interval / 2)
        assert relay.stats.frames_received >= sent  # the ticks all arrived
        await watch.settle()
        assert watch.states == [State.CONNECTED]


# --- the backoff ladder --------------------------------------------------------------


async def test_backoff_while_connector_is_down_then_reset(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """After a healthy link: one redial at once, the quick retries (50 to 400 ms), then
    the ladder; the connector's return is found on the next rung, and the link after it
    (healthy again) resets it all."""
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=EXACT) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        await trio.sleep(DEFAULTS.backoff_stable_after + 1)

        stopped_at = trio.current_time()
        await connector.stop()
        schedule = (*QUICK, *LADDER)
        attempts = 1 + 1 + len(schedule)  # the first dial, the immediate redial, the rest
        with trio.fail_after(sum(schedule) + 60):
            await watch.wait_dials(attempts)
        assert watch.dials[1] == stopped_at  # immediate
        gaps = [b - a for a, b in zip(watch.dials[1:], watch.dials[2:], strict=False)]
        assert gaps == pytest.approx(schedule, abs=EPSILON)
        assert relay.state is State.RECONNECTING
        assert relay.stats.dial_failures >= len(schedule)

        # Between connections a request fails at once, definitely.
        start = trio.current_time()
        outcome = await relay.request(SEND)
        assert (outcome.success, outcome.ambiguous, outcome.code) == (False, False, "not_connected")
        assert trio.current_time() == start

        # The connector comes back: the next rung's dial connects.
        await connector.start()
        with trio.fail_after(LADDER[-1] + EPSILON + 1):
            await relay.wait_connected()
        assert trio.current_time() - watch.dials[attempts - 1] == pytest.approx(LADDER[-1])

        # A link that served backoff_stable_after resets it all.
        await trio.sleep(DEFAULTS.backoff_stable_after + 1)
        dials = len(watch.dials)
        dropped_at = trio.current_time()
        await connector.abort()
        with trio.fail_after(5):
            await watch.wait_dials(dials + 1)
            await connector.wait_session(3)
        assert watch.dials[dials] == dropped_at
        with trio.fail_after(5):
            await watch.wait_state(State.CONNECTED, 3)


async def test_a_restarted_connector_is_found_by_the_quick_retries(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """The listener is down for 0.5 s after a healthy link: the redial at once and the
    quick retries at +0.05, +0.15, +0.35 fail; the one at +0.75 finds it."""
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=EXACT) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        await trio.sleep(DEFAULTS.backoff_stable_after + 1)
        stopped_at = trio.current_time()
        await connector.stop()
        await trio.sleep(0.5)
        await connector.start()
        with trio.fail_after(5):
            await watch.wait_state(State.CONNECTED, 2)
        offsets = [t - stopped_at for t in watch.dials[1:]]
        assert offsets == pytest.approx([0.0, 0.05, 0.15, 0.35, 0.75], abs=EPSILON)
        await watch.settle()
        assert watch.entered(State.CONNECTED)[1].at == pytest.approx(stopped_at + 0.75)


async def test_flapping_connector_climbs_the_ladder(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    """Each session is closed 1 s after its handshake: the ladder is kept across these
    short-lived connections, so the redials slow down instead of hammering."""
    flaps = 5
    closed_at: list[float] = []
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=EXACT) as relay,
    ):
        with trio.fail_after(200):
            for n in range(1, flaps + 1):
                session = await connector.wait_session(n)
                await trio.sleep(1)
                await connector.close(1011, "flapping", session=session)
                closed_at.append(trio.current_time())
            await connector.wait_session(flaps + 1)
            await watch.wait_state(State.CONNECTED, flaps + 1)

        # Redial n (n >= 1) follows close n-1; none of the links was healthy.
        waits = [dial - closed for closed, dial in zip(closed_at, watch.dials[1:], strict=True)]
        assert waits == list(LADDER[:flaps])
        assert relay.stats.dials == flaps + 1
        assert relay.stats.drops["closed by peer"] == flaps
        assert relay.stats.last_close_code == 1011
        await watch.settle()
        assert watch.states == [State.CONNECTED] + [State.RECONNECTING, State.CONNECTED] * flaps
