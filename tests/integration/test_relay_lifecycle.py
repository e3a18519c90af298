"""The relay's life cycle: opening, waiting, leaving the block (cleanly, by exception,
by cancellation), and going idle or dormant on purpose.

The real client against the reference connector on loopback, under the autojump
clock (every time below is mock time).
"""

from __future__ import annotations

import gc
import sys
import types
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio
import trio.testing
from relay_support import (
    SEND,
    Watch,
    chat_event,
    request_into,
    timed,
)

import trio_relay
from trio_relay import (
    MessageEvent,
    Outcome,
    Relay,
    RelayClosed,
    RelayConfig,
    State,
    open_relay,
)
from trio_relay.testing import ReferenceConnector, live_tasks, open_connector, open_fds

DEFAULTS = RelayConfig()
CLOSE_BOUND = DEFAULTS.drain_timeout + DEFAULTS.close_timeout + 1
IN_FLIGHT = 3
HANG = 60
PACKAGE_DIR = Path(trio_relay.__file__).parent
"""Bound on blocks that must end: under the autojump clock a hang would otherwise spin
mock time (the pinger's deadlines) forever."""


@pytest.fixture
def watch() -> Watch:
    return Watch()


async def put_requests_in_flight(
    connector: ReferenceConnector,
    relay: Relay,
    nursery: trio.Nursery,
    outcomes: list[Outcome],
) -> None:
    """Wait for the connection, withhold results, and leave IN_FLIGHT requests (run in
    ``nursery``) waiting on answers the connector has read."""
    with trio.fail_after(5):
        await relay.wait_connected()
    connector.withhold_results()
    for _ in range(IN_FLIGHT):
        nursery.start_soon(request_into, relay, outcomes)
    with trio.fail_after(5):
        await connector.wait_outbound(IN_FLIGHT)


async def release_after(connector: ReferenceConnector, delay: float) -> None:
    await trio.sleep(delay)
    connector.release_results()


# --- opening and waiting -------------------------------------------------------------


async def test_state_goes_connecting_then_connected(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        initial = relay.state  # open_relay does not block on the dial
        with trio.fail_after(5):
            await relay.wait_connected()
        assert initial is State.CONNECTING
        assert relay.state is State.CONNECTED
        await watch.settle()
        assert [(t.old, t.new) for t in watch.transitions] == [(State.CONNECTING, State.CONNECTED)]
        assert relay.stats.dials == relay.stats.connects == 1
        await relay.wait_connected()  # returns at once when connected
        outcome = await relay.request(SEND)
        assert outcome.success, outcome


async def test_wait_connected_times_out_while_the_connector_is_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector:
        await connector.stop()
        async with open_relay(connector.url) as relay:
            start = trio.current_time()
            with pytest.raises(TimeoutError):
                await relay.wait_connected(timeout=5)
            assert trio.current_time() - start == 5  # the caller's bound, to the tick
            assert relay.state is State.CONNECTING  # never connected: not RECONNECTING
            assert relay.stats.dials >= 2  # it kept trying meanwhile
            assert relay.stats.connects == 0
            outcome = await relay.request(SEND)
            assert (outcome.success, outcome.ambiguous, outcome.code) == (
                False,
                False,
                "not_connected",
            )


# --- leaving the block ---------------------------------------------------------------


async def test_leaving_the_block_closes_the_relay(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    async with open_connector() as connector:
        with trio.fail_after(HANG):
            async with watch.open_relay(connector.url) as relay:
                with trio.fail_after(5):
                    await relay.wait_connected()
                session = connector.current
                assert session is not None
        assert relay.state is State.CLOSED
        await watch.settle()
        assert watch.states[-1] is State.CLOSED
        with pytest.raises(RelayClosed), trio.fail_after(60):
            await relay.wait_connected()
        with pytest.raises(RelayClosed):
            await relay.wait_connected(timeout=5)
        start = trio.current_time()
        outcome = await relay.request(SEND)
        assert (outcome.success, outcome.ambiguous, outcome.code) == (False, False, "closing")
        assert trio.current_time() == start
        with trio.fail_after(5):
            await session.closed.wait()
        assert session.close_code == 1000
        assert relay.stats.dials == 1  # no redial after our own close


async def test_an_open_relay_holds_no_suspended_generator_of_ours(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``open_relay`` returns a context manager of its own, not an
    ``@asynccontextmanager`` generator, which would stay suspended for the relay's life
    with every local of the setup (memory of each idle relay, ``bench memory``)."""

    def library_generators() -> set[types.AsyncGeneratorType[object, object]]:
        # (The reference connector, trio_relay.testing, is the test's, not the relay's.)
        return {
            obj
            for obj in gc.get_objects()
            if isinstance(obj, types.AsyncGeneratorType)
            and PACKAGE_DIR in Path(obj.ag_code.co_filename).parents
            and PACKAGE_DIR / "testing" not in Path(obj.ag_code.co_filename).parents
        }

    async with open_connector() as connector:
        # Only those this relay makes: an earlier test's may still wait for collection.
        before = library_generators()
        with trio.fail_after(HANG):
            async with open_relay(connector.url) as relay:
                await relay.wait_connected(5)
                made = library_generators() - before
                assert [gen.ag_code.co_qualname for gen in made] == []
        assert relay.state is State.CLOSED


def test_open_relay_can_be_called_outside_a_trio_run() -> None:
    # The relay is made at the entry, in the run (it reads Trio's clock): the call only
    # keeps its arguments, wherever it is made.
    opening = open_relay("ws://127.0.0.1:9/relay")
    assert isinstance(opening, AbstractAsyncContextManager)


async def test_one_open_relay_is_entered_once(autojump_clock: trio.testing.MockClock) -> None:
    async with open_connector() as connector:
        opening = open_relay(connector.url)
        with trio.fail_after(HANG):
            async with opening as relay:
                await relay.wait_connected(5)
            with pytest.raises(RuntimeError, match="entered once; call open_relay again"):
                async with opening:
                    pass
        assert relay.state is State.CLOSED


@pytest.mark.parametrize("connector_up", [True, False], ids=["connected", "connector-down"])
async def test_exception_in_the_block_propagates_as_itself(
    autojump_clock: trio.testing.MockClock, connector_up: bool
) -> None:
    async with open_connector() as connector:
        if not connector_up:
            await connector.stop()
        with trio.fail_after(HANG), pytest.raises(ValueError, match="boom") as info:
            async with open_relay(connector.url) as relay:
                if connector_up:
                    with trio.fail_after(5):
                        await relay.wait_connected()
                else:
                    await trio.sleep(3)  # between dials
                raise ValueError("boom")
        assert type(info.value) is ValueError  # not an ExceptionGroup around it
        assert relay.state is State.CLOSED


@pytest.mark.parametrize("peer", ["healthy", "silent"])
async def test_cancelled_exit_is_prompt_and_leaves_nothing_behind(
    autojump_clock: trio.testing.MockClock, peer: str
) -> None:
    """Cancelled with requests in flight and their results withheld (and, for
    "silent", a peer that will not even answer the close): the block still ends within
    drain_timeout + close_timeout (+1), with no task and no socket left."""
    outcomes: list[Outcome] = []
    async with open_connector() as connector:
        tasks_before = live_tasks()
        fds_before = open_fds()
        # fail_after: a hang fails the test instead of spinning mock time forever.
        with trio.fail_after(HANG), trio.CancelScope() as scope:
            async with open_relay(connector.url) as relay, trio.open_nursery() as nursery:
                await put_requests_in_flight(connector, relay, nursery, outcomes)
                session = connector.current
                if peer == "silent":
                    connector.go_silent()
                cancelled_at = trio.current_time()
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        took = trio.current_time() - cancelled_at
        assert took <= CLOSE_BOUND
        # Nothing is left to drain (the callers were cancelled), and the relay's reader
        # outlives the cancellation until the close is over: a healthy peer acks
        # going_idle and completes the closing handshake at once; a silent one is given
        # drain_timeout for the ack, then close_timeout.
        silent = DEFAULTS.drain_timeout + DEFAULTS.close_timeout
        assert took == (silent if peer == "silent" else 0.0)
        assert outcomes == []  # cancelled callers get no outcome: they were cancelled
        assert relay.state is State.CLOSED

        # The connector's side of the socket ends too (reset the stalled one).
        assert session is not None
        if peer == "silent":
            await connector.abort(session)
        else:
            with trio.fail_after(5):
                await session.closed.wait()
            assert session.close_code == 1000
        await trio.sleep(1)  # let the connector's session task finish
        assert live_tasks() == tasks_before
        if fds_before is None:
            pytest.skip("no /proc/self/fd: open sockets not counted on this platform")
        assert open_fds() == fds_before


async def test_cancelled_exit_still_reads_answers_while_draining(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The block is cancelled while requests made by tasks *outside* it are in flight;
    the connector answers 1 s later, within drain_timeout. The drain is there for
    exactly this: those requests should get their answers, and the exit should take
    as long as the answers did, not drain_timeout."""
    outcomes: list[Outcome] = []
    answer_after = 1.0
    async with open_connector() as connector:
        with trio.fail_after(HANG):
            async with trio.open_nursery() as outside:
                with trio.CancelScope() as scope:
                    async with open_relay(connector.url) as relay:
                        await put_requests_in_flight(connector, relay, outside, outcomes)
                        outside.start_soon(release_after, connector, answer_after)
                        cancelled_at = trio.current_time()
                        scope.cancel()
                        await trio.sleep_forever()
                took = trio.current_time() - cancelled_at
    assert [(o.success, o.ambiguous) for o in outcomes] == [(True, False)] * IN_FLIGHT
    assert took == answer_after


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_each_redial_leaves_no_socket_behind(autojump_clock: trio.testing.MockClock) -> None:
    async with open_connector() as connector:
        fds_before = open_fds()
        async with open_relay(connector.url) as relay:
            with trio.fail_after(60):
                await relay.wait_connected()
                for n in range(2, 6):
                    await connector.abort()
                    await connector.wait_session(n)
                    await relay.wait_connected()
            fds_connected = open_fds()
        session = connector.current
        if session is not None:
            with trio.fail_after(5):
                await session.closed.wait()
        await trio.sleep(1)
        assert fds_before is not None and fds_connected is not None
        assert fds_connected == fds_before + 2  # one client socket, one connector socket
        assert open_fds() == fds_before


async def test_clean_exit_drains_requests_answered_in_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcomes: list[Outcome] = []
    late: list[Outcome] = []
    release_delay = DEFAULTS.drain_timeout / 2
    async with open_connector() as connector:
        with trio.fail_after(HANG):
            async with trio.open_nursery() as outside:
                async with open_relay(connector.url) as relay:
                    await put_requests_in_flight(connector, relay, outside, outcomes)
                    session = connector.current
                    assert session is not None
                    outside.start_soon(release_after, connector, release_delay)

                    async def request_while_closing() -> None:
                        await trio.sleep(release_delay / 2)
                        await request_into(relay, late)

                    outside.start_soon(request_while_closing)
                    left_at = trio.current_time()
                closed_after = trio.current_time() - left_at
        assert len(outcomes) == IN_FLIGHT
        assert all(o.success and not o.ambiguous for o in outcomes), outcomes
        assert closed_after == release_delay  # the drain ended when the last answer came
        [refused] = late
        assert (refused.success, refused.ambiguous, refused.code) == (False, False, "closing")
        with trio.fail_after(5):
            await session.closed.wait()
        assert session.close_code == 1000
        assert connector.outbound_count == IN_FLIGHT


async def test_clean_exit_gives_up_on_unanswered_requests_after_drain_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcomes: list[Outcome] = []
    async with open_connector() as connector:
        with trio.fail_after(HANG):
            async with trio.open_nursery() as outside:
                async with open_relay(connector.url) as relay:
                    await put_requests_in_flight(connector, relay, outside, outcomes)
                    session = connector.current
                    assert session is not None
                    left_at = trio.current_time()
                closed_after = trio.current_time() - left_at
        assert DEFAULTS.drain_timeout <= closed_after <= CLOSE_BOUND
        assert len(outcomes) == IN_FLIGHT
        for outcome in outcomes:
            # Written, never answered: the connector may have applied it.
            assert (outcome.success, outcome.ambiguous) == (False, True), outcome
            assert outcome.code == "connection_lost"
        with trio.fail_after(5):
            await session.closed.wait()
        assert session.close_code == 1000


# --- going idle and dormant ----------------------------------------------------------


async def test_go_idle_is_acknowledged(autojump_clock: trio.testing.MockClock) -> None:
    async with open_connector() as connector, open_relay(connector.url) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        session = connector.current
        assert session is not None and not session.idle
        assert await relay.go_idle() is True
        assert session.idle
        assert relay.state is State.CONNECTED
        assert connector.current is session


@pytest.mark.parametrize("method", ["go_idle", "go_dormant"])
async def test_unacknowledged_go_idle_keeps_the_connection(
    autojump_clock: trio.testing.MockClock, watch: Watch, method: str
) -> None:
    async with open_connector() as connector, watch.open_relay(connector.url) as relay:
        with trio.fail_after(5):
            await relay.wait_connected()
        session = connector.current
        assert session is not None
        connector.go_silent()
        acked, elapsed = await timed(lambda: getattr(relay, method)(timeout=1))
        assert acked is False
        assert elapsed == 1
        assert relay.state is State.CONNECTED
        assert connector.current is session and session.is_open
        assert relay.stats.dials == 1
        connector.resume_session()
        outcome = await relay.request(SEND)
        assert outcome.success, outcome
        await watch.settle()
        assert watch.states == [State.CONNECTED]


async def test_go_dormant_closes_then_redials_after_the_delay_and_replays(
    autojump_clock: trio.testing.MockClock, watch: Watch
) -> None:
    texts: list[str] = []
    got = trio.Event()

    async def on_message(event: MessageEvent) -> None:
        texts.append(event.text or "")
        if len(texts) == 2:
            got.set()

    async with (
        open_connector() as connector,
        watch.open_relay(connector.url, on_message=on_message) as relay,
    ):
        with trio.fail_after(5):
            await relay.wait_connected()
        first = connector.current
        assert first is not None
        assert await relay.go_idle()
        connector.buffer_inbound(chat_event("while idle", "m1"))  # buffered, not pushed

        assert await relay.go_dormant() is True
        dormant_at = trio.current_time()
        assert relay.state is State.DORMANT
        with trio.fail_after(5):
            await first.closed.wait()
        assert first.close_code == 1000
        connector.buffer_inbound(chat_event("while dormant", "m2"))
        assert texts == []

        with trio.fail_after(30):
            reconnected = await watch.wait_state(State.CONNECTED, 2)
            await got.wait()
        waited = watch.dials[1] - dormant_at
        assert waited >= DEFAULTS.dormant_redial_delay  # armed, but not immediate
        assert waited < DEFAULTS.dormant_redial_delay + 1
        assert reconnected.at == watch.dials[1]
        await watch.settle()
        assert watch.states == [State.CONNECTED, State.DORMANT, State.CONNECTED]
        assert sorted(texts) == ["while dormant", "while idle"]
        with trio.fail_after(5):
            await connector.wait_acks(2)
        assert connector.pending() == []
        assert sum(relay.stats.drops.values()) == 0  # a deliberate close is not a drop
        second = connector.current
        assert second is not None and second is not first and not second.idle
