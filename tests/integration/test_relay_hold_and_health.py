"""The redial hold (docs/protocol.md, "Redial hold") and ``Relay.health()`` on a real
relay against the reference connector, under the autojump clock: no dial while held, a
hold capped at ``redial_hold_max``, a release or the hold's end dialling at once in
place of the backoff wait, ``go_dormant(hold=...)`` in one step, and health through
every state. Dial times come from ``Watch`` (a dialer wrapping the real one)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from relay_support import Ceiling, Watch

from trio_relay import (
    DedupeStore,
    Health,
    RelayConfig,
    RelayStats,
    State,
    UpgradeAuth,
    open_relay,
)
from trio_relay.testing import open_connector

# A young link's drop climbs the ladder: with these, its redial waits exactly 30 s.
SLOW_BACKOFF = RelayConfig(rng=Ceiling(), backoff_initial=30.0, backoff_max=60.0)


async def dropped(watch: Watch, relay_state: State = State.RECONNECTING) -> float:
    """Wait for the drop's state change; the mock time it happened."""
    with trio.fail_after(5):
        transition = await watch.wait_state(relay_state)
    await watch.settle()  # the supervisor is in its wait now
    return transition.at


async def test_a_hold_is_capped_at_redial_hold_max(autojump_clock: trio.testing.MockClock) -> None:
    watch = Watch()
    config = RelayConfig(redial_hold_max=5.0, backoff_first_delay=0.0)
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(5)
        await trio.sleep(10)  # a healthy link: its drop would be redialled at once
        held_at = trio.current_time()
        relay.hold_redial(3600)  # asks for an hour; gets the cap
        assert relay.stats.redial_holds == 1
        await trio.sleep(2)
        await connector.close(1011, "overload")
        await dropped(watch)
        assert len(watch.dials) == 1  # held: the drop's immediate redial did not start
        health = relay.health()
        assert health == Health(
            live=True, ready=False, state=State.RECONNECTING, since=health.since,
            reason="redial held",
        )
        with trio.fail_after(30):
            await watch.wait_state(State.CONNECTED, 2)
        assert watch.dials[1] == pytest.approx(held_at + 5.0)  # the cap, not an hour
        assert relay.health().reason == "connected"


@pytest.mark.parametrize("ends_by", ["release", "its time"])
async def test_the_end_of_a_hold_dials_at_once_in_place_of_the_backoff_wait(
    autojump_clock: trio.testing.MockClock, ends_by: str
) -> None:
    watch = Watch()
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=SLOW_BACKOFF) as relay,
    ):
        await relay.wait_connected(5)
        await connector.close(1011, "overload")  # young: the redial waits 30 s
        lost_at = await dropped(watch)
        await trio.sleep(1)
        relay.hold_redial(20)
        await trio.sleep(3)
        assert len(watch.dials) == 1
        assert relay.health().reason == "redial held"
        if ends_by == "release":
            relay.release_redial()
            end = lost_at + 4  # now
        else:
            end = lost_at + 1 + 20
        with trio.fail_after(60):
            await watch.wait_dials(2)
        # Not at lost_at + 30 (the backoff's), nor the backoff's rest after the hold.
        assert watch.dials[1] == pytest.approx(end)
        with trio.fail_after(5):
            await relay.wait_connected()
        assert relay.stats.redial_holds == 1


async def test_release_without_a_hold_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    watch = Watch()
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=SLOW_BACKOFF) as relay,
    ):
        await relay.wait_connected(5)
        await connector.close(1011, "overload")
        lost_at = await dropped(watch)
        relay.release_redial()
        with trio.fail_after(60):
            await watch.wait_dials(2)
        assert watch.dials[1] == pytest.approx(lost_at + 30.0)  # the backoff's own wait
        assert relay.stats.redial_holds == 0


async def test_go_dormant_with_a_hold_holds_in_the_same_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    watch = Watch()
    config = RelayConfig(dormant_redial_delay=1.0)
    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(5)
        session = connector.current
        assert session is not None
        assert await relay.go_dormant(hold=10) is True
        dormant_at = trio.current_time()
        assert relay.state is State.DORMANT
        assert relay.stats.redial_holds == 1
        with trio.fail_after(5):
            await session.closed.wait()
        assert session.close_code == 1000
        await trio.sleep(5)  # past dormant_redial_delay: the hold keeps it from dialling
        assert len(watch.dials) == 1
        health = relay.health()
        assert (health.live, health.ready, health.state, health.reason) == (
            True, False, State.DORMANT, "redial held",
        )
        with trio.fail_after(30):
            await watch.wait_state(State.CONNECTED, 2)
        assert watch.dials[1] == pytest.approx(dormant_at + 10.0)


async def test_a_bad_hold_is_refused_before_anything_is_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector, open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        for bad in (0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="positive number of seconds"):
                await relay.go_dormant(hold=bad)
            with pytest.raises(ValueError, match="positive number of seconds"):
                relay.hold_redial(bad)
        assert relay.state is State.CONNECTED
        assert connector.current is not None and not connector.current.idle
        assert relay.stats.redial_holds == 0
        assert relay.health().ready


async def test_a_hold_placed_before_the_first_dial_holds_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    watch = Watch()
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        opened_at = trio.current_time()
        relay.hold_redial(3)
        assert relay.health().reason == "redial held"
        with trio.fail_after(30):
            await relay.wait_connected()
        assert watch.dials == [pytest.approx(opened_at + 3)]


async def test_leaving_the_block_does_not_wait_for_a_hold(
    autojump_clock: trio.testing.MockClock,
) -> None:
    watch = Watch()
    async with open_connector() as connector:
        async with watch.open_relay(connector.url, config=SLOW_BACKOFF) as relay:
            await relay.wait_connected(5)
            await connector.close(1011, "overload")
            await dropped(watch)
            relay.hold_redial(50)
            left_at = trio.current_time()
        # Under the autojump clock a wait on the hold would show as 50 s gone.
        assert trio.current_time() - left_at < 1
        assert relay.state is State.CLOSED
        assert len(watch.dials) == 1


# --- health through every state ------------------------------------------------------


async def test_health_through_every_state(autojump_clock: trio.testing.MockClock) -> None:
    watch = Watch()
    seen: dict[str, Health] = {}
    config = RelayConfig(rng=Ceiling(), dormant_redial_delay=1.0)
    async with open_connector(secrets={"gw": "secret"}) as connector:
        await connector.stop()  # refuse dials until started again
        async with watch.open_relay(
            connector.url, auth=UpgradeAuth("gw", "secret"), config=config
        ) as relay:
            opened_at = trio.current_time()
            seen["fresh"] = relay.health()
            with trio.fail_after(5):
                await watch.wait_dials(1)
            await trio.sleep(0.01)
            seen["connecting"] = relay.health()
            await connector.start()
            with trio.fail_after(30):
                await relay.wait_connected()
            seen["connected"] = relay.health()
            await connector.close(1011, "overload")
            await dropped(watch)
            seen["reconnecting"] = relay.health()
            with trio.fail_after(30):
                await watch.wait_state(State.CONNECTED, 2)
            assert await relay.go_dormant()
            seen["dormant"] = relay.health()
            relay.hold_redial(5)
            seen["held"] = relay.health()
            relay.release_redial()
            with trio.fail_after(30):
                await watch.wait_state(State.CONNECTED, 3)
            connector.revoke("gw")
            with trio.fail_after(30):
                await relay.wait_state(State.REVOKED)
            seen["revoked"] = relay.health()
        seen["closed"] = relay.health()

    def at(state: State, count: int = 1) -> float:
        return watch.entered(state)[count - 1].at

    expected = {
        "fresh": (True, False, State.CONNECTING, opened_at),
        "connecting": (True, False, State.CONNECTING, opened_at),
        "connected": (True, True, State.CONNECTED, at(State.CONNECTED)),
        "reconnecting": (True, False, State.RECONNECTING, at(State.RECONNECTING)),
        "dormant": (True, False, State.DORMANT, at(State.DORMANT)),
        "held": (True, False, State.DORMANT, at(State.DORMANT)),
        "revoked": (False, False, State.REVOKED, at(State.REVOKED)),
        "closed": (False, False, State.CLOSED, at(State.CLOSED)),
    }
    assert {k: (h.live, h.ready, h.state, h.since) for k, h in seen.items()} == expected
    assert seen["fresh"].reason == "connecting: no attempt has ended yet"
    assert seen["connecting"].reason.startswith("connecting: ")
    assert "refused" in seen["connecting"].reason
    assert seen["connected"].reason == "connected"
    assert seen["reconnecting"].reason == "reconnecting: closed by peer"
    assert seen["dormant"].reason == "dormant; redial armed"
    assert seen["held"].reason == "redial held"
    assert seen["revoked"].reason.startswith("revoked: ")
    assert seen["closed"].reason == "closed"


class BrokenStore:
    """A dedupe store that cannot open (its disk is gone): the pipeline's task fails."""

    def open(self, *, namespace: str, capacity: int, stats: RelayStats) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        raise OSError("the store's disk is gone")
        yield  # pragma: no cover


async def test_health_is_not_live_once_a_relay_task_failed(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    store: DedupeStore = BrokenStore()
    seen: list[Health] = []
    async with open_connector() as connector:
        with pytest.raises(OSError, match="disk is gone"):
            async with open_relay(connector.url, config=RelayConfig(dedupe_store=store)) as relay:
                try:
                    await trio.sleep_forever()
                finally:  # the block is cancelled by the failure; health is read first
                    seen.append(relay.health())
    assert len(seen) == 1
    assert seen[0].live is False
    assert seen[0].ready is False
    assert seen[0].reason == "1 relay task(s) failed; see the log, and restart"
    assert relay.stats.tasks_failed == 1
    assert relay.health().live is False  # and closed now
    assert not [r for r in caplog.records if r.levelno >= logging.CRITICAL]
