"""The relay socket against a connector whose link vanishes (no FIN, no RST).

The reference connector runs in a network namespace (see netns.py); ``vanish()`` drops
every packet both ways. Two independent mechanisms must notice: the pinger (nothing
received for ``ping_timeout``) and, with the pinger out of the way, the kernel through
the keepalive provider's options on the relay's TCP socket. Kernel-timed, so these use
wall time, a few seconds each.
"""

from __future__ import annotations

import pytest
import trio

import trio_relay
from trio_relay import KeepaliveConfig, RelayConfig, State
from trio_relay.testing.netns import NetnsHost

CONNECTOR = """
import sys, trio
from trio_relay.testing import serve_connector

async def main():
    async with trio.open_nursery() as nursery:
        connector = await nursery.start(lambda task_status: serve_connector(
            host=sys.argv[1], port=0, task_status=task_status))
        print(connector.port, flush=True)

trio.run(main)
"""

# The pinger effectively off: only the kernel can find the dead peer.
NO_PINGER = {"ping_interval": 1800.0, "ping_timeout": 3600.0}


async def start_connector(host: NetnsHost) -> str:
    process = await host.run_python(CONNECTOR, host.address)
    port = int(await process.readline())
    return f"http://{host.address}:{port}"


async def wait_for_state(relay: trio_relay.Relay, state: State) -> None:
    while relay.state is not state:
        await trio.sleep(0.01)


@pytest.mark.netns
async def test_pinger_finds_a_vanished_connector_and_the_relay_recovers(
    netns_host: NetnsHost,
) -> None:
    url = await start_connector(netns_host)
    config = RelayConfig(
        ping_interval=0.5,
        ping_timeout=1.5,
        keepalive=KeepaliveConfig.disabled(),
        allow_insecure=True,  # the namespace's address is ours, not a real network
        backoff_initial=0.2,
        backoff_max=0.4,
        connect_timeout=0.5,
        close_timeout=0.2,
    )
    async with trio_relay.open_relay(url, config=config) as relay:
        await relay.wait_connected(10)
        assert (await relay.request({"op": "typing", "chat_id": "C"})).success
        await netns_host.vanish()
        vanished_at = trio.current_time()
        with trio.fail_after(5):
            await wait_for_state(relay, State.RECONNECTING)
        detected_after = trio.current_time() - vanished_at
        assert relay.stats.drops["keepalive timeout"] == 1
        # Silent for ping_timeout after the last byte (a pong at most ping_interval ago).
        assert 1.5 - 0.5 <= detected_after <= 1.5 + 0.5
        await netns_host.restore()
        await relay.wait_connected(10)
        assert (await relay.request({"op": "typing", "chat_id": "C"})).success


@pytest.mark.netns
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "request-in-flight"])
async def test_kernel_keepalive_finds_a_vanished_connector(
    netns_host: NetnsHost, busy: bool
) -> None:
    """Idle, keepalive probes go unanswered; with a frame unacknowledged,
    TCP_USER_TIMEOUT gives up. Either way the reader sees the socket die."""
    url = await start_connector(netns_host)
    keepalive = KeepaliveConfig(idle=1, interval=1, count=2)  # detection_time = 3 s
    config = RelayConfig(keepalive=keepalive, allow_insecure=True, **NO_PINGER)
    async with trio_relay.open_relay(url, config=config) as relay:
        await relay.wait_connected(10)
        await netns_host.vanish()
        vanished_at = trio.current_time()
        outcomes: list[trio_relay.Outcome] = []
        async with trio.open_nursery() as nursery:
            if busy:

                async def request() -> None:
                    outcomes.append(await relay.request({"op": "typing", "chat_id": "C"}))

                nursery.start_soon(request)
            with trio.fail_after(keepalive.detection_time + 1):
                await wait_for_state(relay, State.RECONNECTING)
        detected_after = trio.current_time() - vanished_at
        assert relay.stats.drops["closed by peer"] == 1  # the socket failed, not the pinger
        assert relay.stats.last_close_code == 1006
        assert detected_after >= 1
        if busy:
            (outcome,) = outcomes
            assert outcome.ambiguous and outcome.code == "connection_lost"


@pytest.mark.netns
async def test_without_keepalive_the_vanished_connector_goes_unnoticed(
    netns_host: NetnsHost,
) -> None:
    """The control: no keepalive options and no pinger, and the dead link looks up."""
    url = await start_connector(netns_host)
    config = RelayConfig(
        keepalive=KeepaliveConfig.disabled(), allow_insecure=True, close_timeout=0.2, **NO_PINGER
    )
    async with trio_relay.open_relay(url, config=config) as relay:
        await relay.wait_connected(10)
        await netns_host.vanish()
        await trio.sleep(4)  # past the keepalive test's 3 s + 1 s bound
        assert relay.state is State.CONNECTED
        assert relay.stats.dials == 1
