"""Every way a dial can fail is a classified, logged, failed dial — never an exception
out of ``open_relay`` (issue 11).

A raw TCP server on loopback reads the upgrade request and answers with hand-made bytes:
each HTTP status class, a ``101`` with a wrong ``Sec-WebSocket-Accept``, an EOF or a
reset midway, garbage. The relay's dials are observed through a :class:`FaultDialer`
wrapping the real dialer (its ``dials`` are the mock times of each attempt).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
from upgrade_support import accept_for, read_head

import trio_relay
from trio_relay import RelayConfig, State, UpgradeAuth
from trio_relay.testing import FaultDialer, default_descriptor

Answer = Callable[[trio.SocketStream, bytes], Awaitable[None]]


@dataclass
class RawServer:
    port: int
    requests: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
async def serve_raw() -> AsyncIterator[Callable[[Answer], Awaitable[RawServer]]]:
    async with trio.open_nursery() as nursery:

        async def start(answer: Answer) -> RawServer:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, host="127.0.0.1"),
                lambda s: _handle(s, answer, server),
                0,
            )
            server = RawServer(listeners[0].socket.getsockname()[1])
            return server

        async def _handle(stream: trio.SocketStream, answer: Answer, server: RawServer) -> None:
            async with stream:
                head = await read_head(stream)
                server.requests.append(head)
                with contextlib.suppress(trio.BrokenResourceError):
                    await answer(stream, head)

        yield start
        nursery.cancel_scope.cancel()


def reply(status_line: str, *headers: str, body: bytes = b"") -> Answer:
    async def answer(stream: trio.SocketStream, head: bytes) -> None:
        lines = [f"HTTP/1.1 {status_line}", *headers, f"Content-Length: {len(body)}"]
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await trio.sleep_forever()  # the client must not wait for us to close

    return answer


def config(dialer: FaultDialer, **overrides: Any) -> RelayConfig:
    settings: dict[str, Any] = {
        "backoff_initial": 1.0,
        "backoff_max": 1.0,
        "close_timeout": 0.2,
        "dialer": dialer,
    }
    settings.update(overrides)
    return RelayConfig(**settings)


async def dial_twice(url: str, dialer: FaultDialer, **overrides: Any) -> trio_relay.Relay:
    async with trio_relay.open_relay(url, config=config(dialer, **overrides)) as relay:
        with trio.fail_after(120):
            await dialer.wait_dials(2)
        assert relay.state is not State.CONNECTED
    return relay


@pytest.mark.parametrize("status", [401, 403])
async def test_401_and_403_count_as_a_4401_before_any_descriptor(
    status: int,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(reply(f"{status} Nope"))
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer)
    assert relay.stats.last_close_code == 4401
    assert relay.stats.connects == 0
    # Before any descriptor a 4401 is a provisioning race: redialled, not revoked.
    assert dialer.dials[1] - dialer.dials[0] <= 1.0 + 1e-9


async def test_every_dial_after_a_401_carries_a_bearer(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(reply("401 Unauthorized"))
    dialer = FaultDialer()
    auth = UpgradeAuth("gw", "s3cret")
    async with trio_relay.open_relay(server.url, auth=auth, config=config(dialer)) as relay:
        with trio.fail_after(60):
            await dialer.wait_dials(3)
    assert relay.stats.dial_failures >= 2
    # (The last dial may be cut short by leaving the block: an empty request.)
    upgrades = [r for r in server.requests if r]
    assert len(upgrades) >= 2
    assert all(b"authorization: bearer " in r.lower() for r in upgrades), upgrades


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
async def test_transient_statuses_redial_and_honour_retry_after(
    status: int,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    server = await serve_raw(reply(f"{status} Busy", "Retry-After: 7"))
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer, backoff_max=30.0)
    # The ladder alone would wait at most 1 s; the server asked for 7.
    assert dialer.dials[1] - dialer.dials[0] == pytest.approx(7.0, abs=1e-6)
    assert relay.stats.last_close_code is None
    assert f"HTTP {status}" in (relay.stats.last_dial_failure or "")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "dial" in r.msg]


async def test_retry_after_is_capped_at_backoff_max(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(reply("503 Busy", "Retry-After: 3600"))
    dialer = FaultDialer()
    await dial_twice(server.url, dialer, backoff_max=5.0)
    assert dialer.dials[1] - dialer.dials[0] == pytest.approx(5.0, abs=1e-6)


@pytest.mark.parametrize(
    ("status", "check"),
    [(404, "path"), (400, "check the connector URL"), (426, "check the connector URL")],
)
async def test_other_4xx_redial_with_a_warning_saying_what_to_check(
    status: int,
    check: str,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await serve_raw(reply(f"{status} Nope"))
    dialer = FaultDialer()
    await dial_twice(server.url, dialer)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"HTTP {status}" in w and check in w for w in warnings), warnings


async def test_a_redirect_is_not_followed_and_the_token_stays_home(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    elsewhere = await serve_raw(reply("200 OK"))
    server = await serve_raw(reply("307 Elsewhere", f"Location: {elsewhere.url}/relay"))
    dialer = FaultDialer()
    auth = UpgradeAuth("gw", "s3cret")
    async with trio_relay.open_relay(server.url, auth=auth, config=config(dialer)) as relay:
        with trio.fail_after(60):
            await dialer.wait_dials(2)
    assert elsewhere.requests == []  # never dialled, so never given the token
    assert relay.stats.connects == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("HTTP 307" in w and "redirect" in w for w in warnings), warnings
    assert not any("s3cret" in r.getMessage() for r in caplog.records)


async def test_a_wrong_accept_is_a_failed_dial_with_a_warning(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def wrong_accept(stream: trio.SocketStream, head: bytes) -> None:
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: d3JvbmcgYWNjZXB0IGtleQ==\r\n\r\n"
        )
        await trio.sleep_forever()

    server = await serve_raw(wrong_accept)
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer)
    assert "Sec-WebSocket-Accept" in (relay.stats.last_dial_failure or "")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Sec-WebSocket-Accept" in w and "check" in w for w in warnings), warnings


async def test_a_correct_accept_but_no_descriptor_is_not_a_dial_failure(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The control for the test above: the same server with the right accept upgrades."""

    async def right_accept(stream: trio.SocketStream, head: bytes) -> None:
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
            + accept_for(head).encode()
            + b"\r\n\r\n"
        )
        await trio.sleep_forever()

    server = await serve_raw(right_accept)
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer, handshake_timeout=2.0)
    assert relay.stats.dial_failures == 0
    assert relay.stats.drops["handshake timeout"] >= 1


def _abort(stream: trio.SocketStream) -> None:
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("how", ["eof", "reset", "garbage", "half a status line"])
async def test_eof_reset_or_garbage_mid_upgrade_fails_the_dial_at_once(
    how: str,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def misbehave(stream: trio.SocketStream, head: bytes) -> None:
        if how == "reset":
            _abort(stream)
        elif how == "garbage":
            await stream.send_all(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
            await trio.sleep_forever()
        elif how == "half a status line":
            await stream.send_all(b"HTTP/1.1 10")
        # leaving the handler closes the stream: EOF (or RST after SO_LINGER 0)

    server = await serve_raw(misbehave)
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer, handshake_timeout=30.0)
    # Failed at once, then the ladder's wait (≤ 1 s): not after the 30 s timeout.
    assert dialer.dials[1] - dialer.dials[0] <= 1.0 + 1e-9
    assert relay.stats.dial_failures >= 1
    assert "upgrade failed" in (relay.stats.last_dial_failure or "")


async def test_a_refused_connection_says_so_in_plain_words(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_relay")
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dialer = FaultDialer()
    relay = await dial_twice(f"http://127.0.0.1:{port}", dialer)
    cause = relay.stats.last_dial_failure or ""
    assert "connection refused (ECONNREFUSED)" in cause, cause
    assert "ExceptionGroup" not in cause and "all attempts" not in cause
    logged = [r.getMessage() for r in caplog.records if "dial failed" in r.getMessage()]
    assert logged and "connection refused" in logged[0]


async def test_upgrade_carries_user_agent_and_extra_headers(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(reply("503 Busy"))
    dialer = FaultDialer()
    await dial_twice(
        server.url, dialer, user_agent="my-gateway/2", extra_headers=(("X-Tenant", "t1"),)
    )
    head = server.requests[0].lower()
    assert b"user-agent: my-gateway/2\r\n" in head
    assert b"x-tenant: t1\r\n" in head
    assert b"sec-websocket-extensions" not in head  # permessage-deflate is off by default


async def test_compression_is_offered_when_asked(
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(reply("503 Busy"))
    await dial_twice(server.url, FaultDialer(), compression=True)
    assert b"sec-websocket-extensions: permessage-deflate" in server.requests[0].lower()


def test_authorization_is_not_an_extra_header() -> None:
    with pytest.raises(ValueError, match="Authorization"):
        RelayConfig(extra_headers=(("Authorization", "Bearer x"),))


# --- the 101: our own check of a plain one, the library's verdict on every other -------


def _answer_101(*headers: bytes, accept: bool = True, pieces: int = 1) -> Answer:
    """A ``101`` with ``headers`` (and the right ``Sec-WebSocket-Accept`` if ``accept``;
    :data:`RIGHT_ACCEPT` among ``headers`` is one more), written in ``pieces`` writes;
    then a descriptor for the hello that follows."""

    async def answer(stream: trio.SocketStream, head: bytes) -> None:
        right = b"Sec-WebSocket-Accept: " + accept_for(head).encode()
        lines = [b"HTTP/1.1 101 Switching Protocols"]
        lines += [right if line is RIGHT_ACCEPT else line for line in headers]
        if accept:
            lines.append(right)
        response = b"\r\n".join(lines) + b"\r\n\r\n"
        step = -(-len(response) // pieces)
        for at in range(0, len(response), step):
            await stream.send_all(response[at : at + step])
            await trio.sleep(0.01)  # each piece a read of its own
        await stream.receive_some(65536)  # the hello
        descriptor = json.dumps(
            {"type": "descriptor", "descriptor": default_descriptor("relay")}
        ).encode()
        payload = descriptor + b"\n"
        await stream.send_all(bytes([0x81, 126]) + struct.pack("!H", len(payload)) + payload)
        await trio.sleep_forever()

    return answer


PLAIN = (b"Upgrade: websocket", b"Connection: Upgrade")
RIGHT_ACCEPT = b"(the right Sec-WebSocket-Accept)"


@pytest.mark.parametrize(
    ("headers", "pieces"),
    [
        (PLAIN, 1),
        (PLAIN, 7),  # the head arrives in pieces: decided once it is whole
        ((b"upgrade: WebSocket", b"CONNECTION: upgrade", b"Server: x  "), 1),
        # Not a plain 101 by our check, accepted by the library's:
        ((b"Upgrade: websocket", b"Connection: keep-alive, Upgrade"), 1),
        ((b"Upgrade: websocket", b"Connection: Upgrade", b"Connection: keep-alive"), 1),
    ],
)
async def test_a_101_the_library_accepts_connects(
    headers: tuple[bytes, ...],
    pieces: int,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(_answer_101(*headers, pieces=pieces))
    dialer = FaultDialer()
    async with trio_relay.open_relay(server.url, config=config(dialer)) as relay:
        await relay.wait_connected(timeout=30)
        assert relay.stats.dial_failures == 0


@pytest.mark.parametrize(
    ("headers", "accept", "named"),
    [
        ((b"Connection: Upgrade",), True, "Upgrade"),
        ((b"Upgrade: h2c", b"Connection: Upgrade"), True, "Upgrade"),
        ((b"Upgrade: websocket",), True, "Connection"),
        (PLAIN, False, "Sec-WebSocket-Accept"),
        ((*PLAIN, RIGHT_ACCEPT), True, "multiple values"),
        # An extension or a subprotocol we never offered:
        ((*PLAIN, b"Sec-WebSocket-Extensions: permessage-deflate"), True, "no extensions"),
        ((*PLAIN, b"Sec-WebSocket-Protocol: chat"), True, "no subprotocols"),
        ((*PLAIN, b"Bad Header: x"), True, "not an HTTP answer"),
    ],
)
async def test_a_101_the_library_refuses_is_a_failed_dial_it_names(
    headers: tuple[bytes, ...],
    accept: bool,
    named: str,
    serve_raw: Callable[[Answer], Awaitable[RawServer]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = await serve_raw(_answer_101(*headers, accept=accept))
    dialer = FaultDialer()
    relay = await dial_twice(server.url, dialer)
    assert relay.stats.connects == 0
    assert named in (relay.stats.last_dial_failure or ""), relay.stats.last_dial_failure
