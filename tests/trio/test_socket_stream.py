"""The relay's own TCP stream (``_trio/link/stream.py``), and TLS over it, on real loopback sockets:
how it connects, what reads and writes return and raise, when it yields (only when it
must wait, and at least every ``READS_PER_CHECKPOINT`` reads), and, through the public
relay, that a request's direct write never blocks its task on a full socket. The peer
is a ``trio.SocketStream``; a peer *reset* is a close with ``SO_LINGER`` 0 (RST)."""

from __future__ import annotations

import errno
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
import trustme

import trio_relay
from trio_relay import RelayConfig
from trio_relay._trio.link.stream import (
    READS_PER_CHECKPOINT,
    SocketStream,
    TLSStream,
    open_tcp,
)
from trio_relay.testing import open_connector


class Scheduling(trio.abc.Instrument):
    """Counts the tasks spawned, and the steps of one task (each step after its first
    is a resumption, i.e. that task yielded to the scheduler in between)."""

    def __init__(self, task: trio.lowlevel.Task | None = None) -> None:
        self.task = task
        self.spawned = 0
        self.steps = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1

    def __enter__(self) -> Scheduling:
        trio.lowlevel.add_instrument(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        trio.lowlevel.remove_instrument(self)


@asynccontextmanager
async def listening() -> AsyncIterator[tuple[trio.SocketListener, int]]:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with listener:
        yield listener, listener.socket.getsockname()[1]


@asynccontextmanager
async def connected() -> AsyncIterator[tuple[SocketStream, trio.SocketStream]]:
    """Our stream and the peer's end of one loopback connection."""
    async with listening() as (listener, port):
        stream = await open_tcp("127.0.0.1", port)
        try:
            async with await listener.accept() as peer:
                yield stream, peer
        finally:
            stream.close()


async def reset(peer: trio.SocketStream) -> None:
    peer.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await peer.aclose()


def nodelay(stream: SocketStream) -> int:
    return stream.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


# --- open_tcp ---------------------------------------------------------------------------


async def test_an_ip_literal_is_one_connect_with_nodelay_and_no_task() -> None:
    async with listening() as (listener, port):
        with Scheduling() as counts:
            stream = await open_tcp("127.0.0.1", port)
        assert counts.spawned == 0  # no happy-eyeballs nursery, no attempt task
        async with stream, await listener.accept() as peer:
            assert stream.socket.getpeername() == ("127.0.0.1", port)
            assert nodelay(stream) != 0
            await stream.send_all(b"ping")
            assert await peer.receive_some() == b"ping"


async def test_a_port_nobody_listens_on_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with socket.socket() as bound:  # bound, never listening: nobody else can take it
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with trio.fail_after(10), pytest.raises(OSError) as refused:
            await open_tcp("127.0.0.1", port)
    assert refused.value.errno == errno.ECONNREFUSED
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert trio.current_time() == 0  # no wait for any timeout: refused promptly


async def test_a_host_name_goes_through_happy_eyeballs() -> None:
    async with listening() as (listener, port):
        with Scheduling() as counts:
            stream = await open_tcp("localhost", port)
        assert counts.spawned >= 1  # trio.open_tcp_stream's attempt task(s)
        async with stream:
            assert isinstance(stream, SocketStream)
            assert nodelay(stream) != 0  # Trio sets it; from_trio keeps it
            async with await listener.accept() as peer:
                await peer.send_all(b"hello")
                assert await stream.receive_some() == b"hello"


# --- receive_some -----------------------------------------------------------------------


async def test_receive_some_returns_the_peers_bytes_then_empty_at_eof() -> None:
    async with connected() as (stream, peer):
        await peer.send_all(b"hello world")
        assert await stream.receive_some(5) == b"hello"
        assert await stream.receive_some() == b" world"
        await peer.send_eof()
        assert await stream.receive_some() == b""
        assert await stream.receive_some() == b""
        with pytest.raises(ValueError):
            await stream.receive_some(0)


async def test_receive_some_after_a_peer_reset_is_broken_with_the_oserror_as_cause() -> None:
    async with connected() as (stream, peer):
        await reset(peer)
        with pytest.raises(trio.BrokenResourceError) as broken:
            await stream.receive_some()
    assert isinstance(broken.value.__cause__, OSError)
    assert broken.value.__cause__.errno == errno.ECONNRESET


async def test_use_after_aclose_is_closed_resource_error() -> None:
    async with connected() as (stream, _peer):
        await stream.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await stream.receive_some()
        with pytest.raises(trio.ClosedResourceError):
            await stream.send_all(b"x")
        with pytest.raises(trio.ClosedResourceError):
            stream.send_nowait(b"x")


async def test_closing_wakes_a_task_blocked_in_receive_some(
    autojump_clock: trio.testing.MockClock,
) -> None:
    woken_at: list[float] = []

    async def blocked_reader(stream: SocketStream) -> None:
        with pytest.raises(trio.ClosedResourceError):
            await stream.receive_some()  # the peer sends nothing
        woken_at.append(trio.current_time())

    async with connected() as (stream, _peer):
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(blocked_reader, stream)
                await trio.sleep(1)  # the reader is parked on the socket by now
                stream.close()
    assert woken_at == [1]


# --- when reads yield -------------------------------------------------------------------

CHUNK = 100
"""Bytes per read in the checkpoint tests: every read is full, so none finds the
socket drained, and the peer has sent enough for several times READS_PER_CHECKPOINT."""


async def test_reads_that_find_bytes_waiting_yield_only_every_so_often() -> None:
    reads = 4 * READS_PER_CHECKPOINT
    async with connected() as (stream, peer):
        await peer.send_all(b"r" * CHUNK * reads)  # loopback: all readable on return
        yielded: list[bool] = []
        with Scheduling(trio.lowlevel.current_task()) as steps:
            for _ in range(reads):
                before = steps.steps
                assert await stream.receive_some(CHUNK) == b"r" * CHUNK
                yielded.append(steps.steps > before)
    runs = [len(run) for run in "".join("y" if y else "." for y in yielded).split("y")]
    # Reads that find bytes waiting go on without a scheduler turn...
    assert max(runs) >= READS_PER_CHECKPOINT - 1, yielded
    assert sum(yielded) <= reads // (READS_PER_CHECKPOINT - 1), yielded
    # ... but never more than READS_PER_CHECKPOINT of them in a row.
    assert max(runs) <= READS_PER_CHECKPOINT, yielded


async def test_a_cancel_reaches_a_reader_whose_socket_never_runs_dry() -> None:
    async with connected() as (stream, peer):
        await peer.send_all(b"c" * CHUNK * 4 * READS_PER_CHECKPOINT)
        reads = 0
        with trio.CancelScope() as scope:
            scope.cancel()  # delivered at the reader's next checkpoint
            while True:
                await stream.receive_some(CHUNK)
                reads += 1
        assert scope.cancelled_caught
    assert READS_PER_CHECKPOINT - 1 <= reads <= READS_PER_CHECKPOINT


async def test_a_read_that_finds_the_socket_drained_waits_for_the_next_bytes() -> None:
    async with connected() as (stream, peer):
        await peer.send_all(b"short")
        assert await stream.receive_some(CHUNK) == b"short"  # drained: the next one waits
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.send_all, b"later")
            assert await stream.receive_some(CHUNK) == b"later"


# --- writes -----------------------------------------------------------------------------


async def test_send_all_larger_than_the_buffers_waits_until_the_peer_reads() -> None:
    payload = bytes(range(256)) * (16 * 1024)  # 4 MiB, against 64 KiB buffers
    async with connected() as (stream, peer):
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        peer.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        sent = trio.Event()

        async def sender() -> None:
            await stream.send_all(payload)
            sent.set()
            await stream.send_eof()

        received = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()  # the buffers are full: it waits for writability
            while data := await peer.receive_some(1 << 16):
                received += data
        assert sent.is_set()
    assert received == payload


async def test_send_nowait_returns_what_the_kernel_took_and_zero_when_full() -> None:
    chunk = b"n" * 50_001  # not a multiple of any buffer size: the last take is partial
    async with connected() as (stream, peer):
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        peer.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        assert stream.send_nowait(b"first") == 5
        taken = [5]
        for _ in range(1000):  # a few MiB at most: the buffers are 64 KiB each
            taken.append(stream.send_nowait(chunk))
            if taken[-1] < len(chunk):
                break
        assert taken[-1] < len(chunk), "the socket never filled"
        assert stream.send_nowait(chunk) == 0  # full: nothing taken, nothing waited for
        await stream.send_eof()
        received = 0
        while data := await peer.receive_some():
            received += len(data)
    assert received == sum(taken)  # exactly the bytes it reported taken


async def test_a_send_after_a_peer_reset_is_broken() -> None:
    async with connected() as (stream, peer):
        await reset(peer)
        with pytest.raises(trio.BrokenResourceError) as broken:
            await stream.send_all(b"x")
        assert isinstance(broken.value.__cause__, OSError)
        with pytest.raises(trio.BrokenResourceError):
            stream.send_nowait(b"x")


# --- through the relay ------------------------------------------------------------------


async def test_a_direct_write_into_a_full_socket_leaves_the_request_its_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One request, alone on an idle connection, so it writes directly; its frame is
    far larger than what the kernel buffers for a peer that stopped reading, so the
    socket fills during that write. The request still ends at its own deadline (the
    rest of the frame is the writer's to wait on), and the frame completes, in order,
    once the connector reads again."""
    big = 32 << 20
    config = RelayConfig(
        max_message_bytes=big, close_timeout=0.2, ping_interval=5_000.0, ping_timeout=10_000.0
    )
    async with open_connector(max_message_bytes=big) as connector, trio_relay.open_relay(
        connector.url, config=config
    ) as relay:
        await relay.wait_connected(5)
        session = connector.current
        connector.go_silent()
        action = {"op": "send", "chat_id": "C1", "content": "z" * (12 << 20)}
        started = trio.current_time()
        outcome = await relay.request(action, timeout=1.0)
        assert trio.current_time() - started == 1.0
        assert (outcome.code, outcome.ambiguous) == ("timeout", True)  # part of it left
        connector.resume_session(session)
        with trio.fail_after(100):  # far before any ping: only the writer can finish it
            while not connector.outbound:
                await trio.sleep(0.01)
        after = await relay.request({"op": "send", "chat_id": "C1", "content": "next"}, timeout=60)
        assert after.success
    contents = [len(frame.action["content"]) for frame in connector.outbound]
    assert contents == [12 << 20, 4]


# --- TLS over it --------------------------------------------------------------------------


async def test_tls_takes_no_direct_write_and_closes_at_once() -> None:
    """``TLSStream.send_nowait`` takes nothing (the slow path: ``send_all``), which
    works; ``close`` ends the TCP stream without a checkpoint, waking a blocked read,
    and a later direct write raises as on the socket."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    async with connected() as (tcp, peer):
        server = trio.SSLStream(peer, server_context, server_side=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.do_handshake)
            tls = await TLSStream.handshake(tcp, client_context, "localhost")
        assert tls.send_nowait(b"hello") == 0
        await tls.send_all(b"hello")
        assert await server.receive_some(5) == b"hello"
        errors: list[BaseException] = []

        async def blocked_read() -> None:
            try:
                await tls.receive_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked_read)
            await trio.testing.wait_all_tasks_blocked()
            tls.close()
        assert len(errors) == 1
        assert tcp.closed
        with pytest.raises(trio.ClosedResourceError):
            tls.send_nowait(b"x")
