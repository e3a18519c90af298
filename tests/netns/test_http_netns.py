"""The CLOSE-WAIT hang, reproduced: a streaming provider whose link goes silent.

The server runs in a network namespace (see netns.py); ``vanish()`` drops every packet
both ways, so the client never sees a FIN or RST. Kernel-timed, so these use wall time.
"""

from __future__ import annotations

import math
import os
from types import ModuleType

import httpx
import httpx2
import pytest
import trio

import trio_relay.http
import trio_relay.http.httpx1
from trio_relay._core.keepalive import KeepaliveConfig
from trio_relay.testing.netns import (
    NetnsHost,
    NetnsUnavailable,
    open_netns_host,
    unavailable,
)
from trio_relay.testing.netns import (
    netns_host as sync_netns_host,
)

# Accepts any number of connections; each gets a chunked event stream of three events,
# then silence (the connection is held open, as a provider mid-generation would).
STREAMING_SERVER = """
import socket, sys, threading, time

server = socket.create_server((sys.argv[1], 0))
print(server.getsockname()[1], flush=True)

def serve(conn):
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: text/event-stream\\r\\n"
                 b"Transfer-Encoding: chunked\\r\\n\\r\\n")
    for number in range(3):
        event = b"data: %d\\n\\n" % number
        conn.sendall(b"%x\\r\\n%s\\r\\n" % (len(event), event))
    time.sleep(3600)

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""

LAST_EVENT = b"data: 2\n\n"


@pytest.mark.netns
async def test_vanish_is_silent(netns_host: NetnsHost) -> None:
    """The helper's promise: after vanish(), neither a FIN nor a RST gets through."""
    server = await netns_host.run_python(STREAMING_SERVER, netns_host.address)
    port = int(await server.readline())
    stream = await trio.open_tcp_stream(netns_host.address, port)
    async with stream:
        await netns_host.vanish()
        await server.kill()  # its kernel sends a FIN, which must not arrive
        with trio.move_on_after(1) as still_waiting:
            await stream.receive_some()
        assert still_waiting.cancelled_caught, "the peer's FIN got through"
        # A closed port answers with RST, unless it is silenced.
        with trio.move_on_after(0.5) as unanswered:
            await trio.open_tcp_stream(netns_host.address, port)
        assert unanswered.cancelled_caught, "the peer's RST got through"
        # Control: once restored, the same RST is answered at once.
        await netns_host.restore()
        with trio.fail_after(1), pytest.raises(OSError):
            await trio.open_tcp_stream(netns_host.address, port)


@pytest.mark.netns
async def test_teardown_after_a_failure_leaves_nothing_behind() -> None:
    try:
        async with open_netns_host() as host:
            server = await host.run_python("import time; print('up'); time.sleep(3600)")
            assert await server.readline() == "up"
            raise RuntimeError("the test body failed")
    except NetnsUnavailable as exc:
        if os.environ.get("TRIO_RELAY_REQUIRE_NETNS") == "1":
            pytest.fail(f"network namespaces required but unavailable: {exc}")
        pytest.skip(f"network namespaces unavailable: {exc}")
    except RuntimeError as exc:
        assert str(exc) == "the test body failed"
    assert server.process.returncode is not None
    namespaces = (await trio.run_process(["ip", "netns", "list"], capture_stdout=True)).stdout
    assert host.namespace.encode() not in namespaces
    link = await trio.run_process(["ip", "link", "show", host.host_device], check=False,
                                  capture_stdout=True, capture_stderr=True)  # fmt: skip
    assert link.returncode != 0


async def test_without_root_the_reason_is_stated() -> None:
    # Judged for an ordinary user's id: as root this would otherwise build a namespace.
    with pytest.raises(NetnsUnavailable, match="need root"):
        async with open_netns_host(euid=1000):
            pass
    with pytest.raises(NetnsUnavailable, match="need root"), sync_netns_host(euid=1000):
        pass
    assert unavailable(euid=1000) == "network namespaces need root (run as root)"


async def _read_until(chunks: object, marker: bytes) -> None:
    received = b""
    while marker not in received:
        received += await anext(chunks)  # type: ignore[call-overload]


@pytest.mark.netns
@pytest.mark.parametrize(
    ("api", "module"),
    [(trio_relay.http, httpx2), (trio_relay.http.httpx1, httpx)],
    ids=["httpx2", "httpx"],
)
async def test_keepalive_client_notices_a_vanished_streaming_peer(
    netns_host: NetnsHost, api: ModuleType, module: ModuleType
) -> None:
    config = KeepaliveConfig(idle=1, interval=1, count=2)
    bound = config.idle + config.interval * config.count + 1  # 4 s
    assert config.detection_time + 1 == bound  # TCP_USER_TIMEOUT (derived) is within it too
    server = await netns_host.run_python(STREAMING_SERVER, netns_host.address)
    url = f"http://{netns_host.address}:{int(await server.readline())}/stream"

    # timeout=None on both, as LLM streaming clients run: only TCP may end the read.
    async with (
        api.keepalive_client(keepalive=config, timeout=None, trust_env=False) as guarded,
        module.AsyncClient(timeout=None, trust_env=False) as plain,
        guarded.stream("GET", url) as guarded_response,
        plain.stream("GET", url) as plain_response,
    ):
        guarded_chunks = guarded_response.aiter_raw()
        plain_chunks = plain_response.aiter_raw()
        with trio.fail_after(5):
            await _read_until(guarded_chunks, LAST_EVENT)
            await _read_until(plain_chunks, LAST_EVENT)

        await netns_host.vanish()
        start = trio.current_time()
        guarded_failed_after = math.inf
        plain_blocked_at_bound = False

        async def read_guarded() -> None:
            nonlocal guarded_failed_after
            with trio.move_on_after(bound + 2), pytest.raises(module.ReadError):
                await anext(guarded_chunks)
            guarded_failed_after = trio.current_time() - start

        async def read_plain() -> None:
            nonlocal plain_blocked_at_bound
            with trio.move_on_at(start + bound) as scope:
                await anext(plain_chunks)
            plain_blocked_at_bound = scope.cancelled_caught

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_guarded)
            nursery.start_soon(read_plain)

    assert config.idle <= guarded_failed_after <= bound, guarded_failed_after
    assert plain_blocked_at_bound, "the plain client should still hang: no FIN, no RST"
