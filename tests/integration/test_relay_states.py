"""State changes as an API (``state_changes()``, ``wait_state()``) on a real relay, and
the diagnostics a user can act on (issue 12): what a refused credential, a failed dial
and a timed-out ``wait_connected()`` say, and at which level.

The real client against the reference connector, under the autojump clock.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from relay_support import Ceiling

from trio_relay import RelayClosed, RelayConfig, RelayRevoked, State, UpgradeAuth, open_relay
from trio_relay.testing import ReferenceConnector, open_connector

SECRETS = {"gw": "secret"}
EXACT = RelayConfig(rng=Ceiling())
CREDENTIALS = "the connector refused our credentials: check the gateway id and secret"


async def test_state_changes_report_a_whole_life(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[tuple[State, State, str]] = []
    # The nursery outlives the relay: the iterator ends by itself after CLOSED.
    async with (
        open_connector() as connector,
        trio.open_nursery() as nursery,
        open_relay(connector.url) as relay,
    ):
        changes = relay.state_changes()

        async def record() -> None:
            async for change in changes:
                seen.append(change)

        nursery.start_soon(record)
        assert await relay.wait_state(State.CONNECTED, timeout=5) is State.CONNECTED
        await trio.sleep(10)
        await connector.close(1011, "overload")
        assert await relay.wait_state(State.RECONNECTING, timeout=5) is State.RECONNECTING
        await relay.wait_state(State.CONNECTED, timeout=5)
        assert await relay.go_dormant()
        await relay.wait_state(State.CONNECTED, timeout=5)
    assert [(old, new) for old, new, _ in seen] == [
        (State.CONNECTING, State.CONNECTED),
        (State.CONNECTED, State.RECONNECTING),
        (State.RECONNECTING, State.CONNECTED),
        (State.CONNECTED, State.DORMANT),
        (State.DORMANT, State.CONNECTED),
        (State.CONNECTED, State.CLOSED),
    ]
    causes = [cause for _, _, cause in seen]
    assert causes[0] == "handshake done, platforms ['relay']"
    assert causes[1] == "closed by peer"
    assert causes[3] == "went dormant; redial armed"
    assert causes[5] == "relay closed"


async def test_wait_state_accepts_several_states_and_times_out_to_the_tick(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector:
        await connector.stop()
        async with open_relay(connector.url) as relay:
            assert await relay.wait_state(State.CONNECTED, State.CONNECTING) is State.CONNECTING
            start = trio.current_time()
            with pytest.raises(TimeoutError):
                await relay.wait_state(State.CONNECTED, timeout=7)
            assert trio.current_time() - start == 7
    with pytest.raises(RelayClosed):
        await relay.wait_state(State.CONNECTED)
    assert await relay.wait_state(State.CLOSED) is State.CLOSED


async def test_wait_state_raises_once_revoked(autojump_clock: trio.testing.MockClock) -> None:
    async with (
        open_connector(secrets=SECRETS) as connector,
        open_relay(connector.url, auth=UpgradeAuth("gw", "secret")) as relay,
    ):
        await relay.wait_connected(5)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _revoke_after(connector, 2))
            with pytest.raises(RelayRevoked):
                await relay.wait_state(State.DORMANT, timeout=60)
        assert await relay.wait_state(State.REVOKED, timeout=0.1) is State.REVOKED


async def _revoke_after(connector: ReferenceConnector, delay: float) -> None:
    await trio.sleep(delay)
    connector.revoke("gw")


# --- diagnostics ---------------------------------------------------------------------


def supervisor_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "trio_relay" and "next attempt in" in r.message]


async def test_refused_credentials_say_what_to_check_and_warn_from_the_second(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    wrong = UpgradeAuth("gw", "not-the-secret")
    async with (
        open_connector(secrets=SECRETS) as connector,
        open_relay(connector.url, auth=wrong, config=EXACT) as relay,
    ):
        with pytest.raises(TimeoutError) as info:
            await relay.wait_connected(timeout=4)
    records = supervisor_records(caplog)
    # Dials at 0, 1 and 3 s (the ladder: 1, 2): three refusals, one line each.
    assert [r.levelno for r in records] == [logging.INFO, logging.WARNING, logging.WARNING]
    for record, delay in zip(records, ("1 s", "2 s", "4 s"), strict=True):
        assert record.message.endswith(
            f"dial failed: {CREDENTIALS} (4401 unauthorized); next attempt in {delay}"
        )
    assert "not-the-secret" not in caplog.text
    # One line per refused dial, nothing else at INFO or above about them.
    ended = [r for r in caplog.records if "connection ended" in r.message]
    assert all(r.levelno == logging.DEBUG for r in ended)
    text = str(info.value)
    assert "relay not connected within 4 s" in text
    assert "last close 4401 unauthorized" in text
    assert text.endswith(CREDENTIALS)
    assert "check the URL" not in text


async def test_each_failed_dial_logs_once_with_its_next_attempt_and_escalates(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector:
        await connector.stop()
        async with open_relay(connector.url, config=EXACT) as relay:
            with pytest.raises(TimeoutError) as info:
                await relay.wait_connected(timeout=62)
    records = supervisor_records(caplog)
    # Dials at 0, 1, 3, 7, 15, 31 and 61 s.
    delays = ["1 s", "2 s", "4 s", "8 s", "16 s", "30 s", "30 s"]
    assert len(records) == relay.stats.dial_failures == len(delays)
    assert [r.levelno for r in records] == [logging.INFO] * 5 + [logging.WARNING] * 2
    for record, delay in zip(records, delays, strict=True):
        assert "dial failed: connect failed: " in record.message
        assert record.message.endswith(f"; next attempt in {delay}")
    dial_lines = [r for r in caplog.records if "dial failed" in r.message]
    assert dial_lines == records  # nothing else logs a failed dial
    assert "check the URL" in str(info.value) and "connect failed" in str(info.value)


async def test_a_healthy_link_s_drop_is_logged_with_its_immediate_redial(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    async with open_connector() as connector, open_relay(connector.url, config=EXACT) as relay:
        await relay.wait_connected(5)
        await trio.sleep(10)
        await connector.close(1011, "overload")
        await relay.wait_state(State.RECONNECTING, timeout=5)
        await relay.wait_connected(5)
    [record] = supervisor_records(caplog)
    assert record.levelno == logging.INFO
    assert record.message.endswith("link lost: closed by peer; next attempt in 0 s")
