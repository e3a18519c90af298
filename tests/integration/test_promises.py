"""Promises that must hold against a hostile connector (issue 12 items 1, 3, 4) and
the handshake that is up on the first descriptor (issue 14)."""

from __future__ import annotations

import json
import logging

import pytest
import trio
import trio.testing

import trio_relay
from trio_relay import Identity, RelayConfig, State
from trio_relay.testing import default_descriptor, live_tasks, open_connector

SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_nan_and_infinity_from_the_connector_are_rejected(constant: str) -> None:
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        line = '{"type": "interrupt_inbound", "session_key": "s", "chat_id": "C", "v": %s}\n'
        await connector.inject_raw(line % constant)
        with trio.fail_after(5):
            while relay.stats.frames_rejected < 1:
                await trio.sleep(0.001)
        assert relay.state is State.CONNECTED
        assert (await relay.request(SEND)).success


async def test_a_platform_without_a_descriptor_gets_only_the_legacy_ops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The connector answers the hello for "other" with a descriptor for a platform we
    never named: it is rejected, and "other" has no descriptor — so an op beyond the
    legacy set is refused for it, not sent unchecked."""
    identities = [Identity("relay", "B1"), Identity("other", "B2")]
    overrides = {"other": {"platform": "elsewhere", "supported_ops": ["send", "react"]}}
    async with open_connector(descriptors=overrides) as connector, trio_relay.open_relay(
        connector.url, identities=identities
    ) as relay:
        await relay.wait_connected(5)
        with trio.fail_after(5):
            while relay.stats.frames_rejected < 1:
                await trio.sleep(0.001)
        assert set(relay.descriptors) == {"relay"}
        refused = await relay.request(
            {"op": "react", "chat_id": "C1", "message_id": "m", "emoji": "x"}, platform="other"
        )
        assert refused.code == "unsupported_op", refused
        assert (await relay.request(SEND, platform="other")).success  # legacy op: sent
    assert all(frame.action["op"] != "react" for frame in connector.outbound)


async def test_connected_on_the_first_descriptor_later_ones_added_as_they_come(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_relay")
    identities = [Identity("relay", "B1"), Identity("late", "B2"), Identity("never", "B3")]
    # The connector's answers to the hellos for "late" and "never" name other platforms
    # (rejected), so only "relay" is described at first.
    overrides = {"late": {"platform": "x-late"}, "never": {"platform": "x-never"}}
    config = RelayConfig(handshake_timeout=10.0)
    async with open_connector(descriptors=overrides) as connector, trio_relay.open_relay(
        connector.url, identities=identities, config=config
    ) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        up_at = trio.current_time()
        assert relay.default_platform == "relay"
        assert relay.stats.missing_descriptors == []  # not yet: the handshake's time runs
        frame = {"type": "descriptor", "descriptor": default_descriptor("late")}
        await connector.inject_raw(json.dumps(frame) + "\n")
        with trio.fail_after(5):
            while "late" not in relay.descriptors:
                await trio.sleep(0.001)
        await trio.sleep(10.0 - (trio.current_time() - up_at) + 0.001)
        assert relay.stats.missing_descriptors == ["never"]
        assert relay.state is State.CONNECTED
        assert set(relay.descriptors) == {"relay", "late"}
    warnings = [r.getMessage() for r in caplog.records if "no descriptor for" in r.getMessage()]
    assert len(warnings) == 1 and "never" in warnings[0] and "late" not in warnings[0]


async def test_an_idle_connection_runs_two_tasks_and_the_writer_only_for_a_burst() -> None:
    def relay_tasks() -> list[str]:
        # The relay's own tasks (the in-process connector's are trio_relay.testing.*).
        return sorted(t.name for t in live_tasks() if t.name.startswith("trio_relay._trio."))

    # The whole relay, idle: the supervisor (serving the connection, its timer inline)
    # and the reader; no pipeline task until an inbound frame comes, no writer.
    idle = [
        "trio_relay._trio.connection.connection.Connection._reader",
        "trio_relay._trio.supervisor.Supervisor.run",
    ]
    async with open_connector() as connector, trio_relay.open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        await trio.testing.wait_all_tasks_blocked()
        assert relay.stats.connection_tasks == 2
        assert relay_tasks() == idle
        assert relay.stats.tasks == 2  # what stats report is what runs
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(relay.request, SEND)
            await trio.testing.wait_all_tasks_blocked()
            assert relay.stats.connection_tasks in (2, 3)
        await trio.testing.wait_all_tasks_blocked()
        assert relay.stats.connection_tasks == 2  # the writer is gone again
        assert relay_tasks() == idle
        assert relay.stats.tasks == 2
