"""KeepaliveConfig: option values, validation, the disabled form, and real setsockopt."""

from __future__ import annotations

import dataclasses
import math
import socket
import sys
from typing import Any

import pytest
import trio

from trio_relay._core.keepalive import KeepaliveConfig

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="Linux option names")
TCP = socket.IPPROTO_TCP
NODELAY = (TCP, socket.TCP_NODELAY, 1)


@linux_only
def test_default_options_are_the_contract_timings() -> None:
    assert KeepaliveConfig().socket_options() == [
        NODELAY,
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (TCP, socket.TCP_KEEPIDLE, 30),
        (TCP, socket.TCP_KEEPINTVL, 10),
        (TCP, socket.TCP_KEEPCNT, 3),
        (TCP, socket.TCP_USER_TIMEOUT, 60_000),  # idle + interval * count, in ms
    ]
    assert KeepaliveConfig().detection_time == 60


@linux_only
def test_seconds_are_rounded_up_for_the_kernel() -> None:
    config = KeepaliveConfig(idle=0.2, interval=1.5, count=2)
    options = {option: value for _, option, value in config.socket_options()}
    assert options[socket.TCP_KEEPIDLE] == 1
    assert options[socket.TCP_KEEPINTVL] == 2
    assert options[socket.TCP_USER_TIMEOUT] == 5_000  # derived from the rounded values
    assert config.detection_time == 5


@linux_only
def test_explicit_user_timeout_is_in_milliseconds() -> None:
    options = {o: v for _, o, v in KeepaliveConfig(user_timeout=2.5).socket_options()}
    assert options[socket.TCP_USER_TIMEOUT] == 2_500


def test_disabled_keeps_only_nodelay() -> None:
    config = KeepaliveConfig.disabled()
    assert config.socket_options() == [NODELAY]
    assert config.detection_time == math.inf


def test_nodelay_and_keepalive_are_always_first() -> None:
    # Portable part of the contract, whatever else the platform offers.
    options = KeepaliveConfig().socket_options()
    assert options[:2] == [NODELAY, (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("idle", 0),
        ("idle", -1),
        ("idle", math.nan),
        ("idle", 40_000),  # above the kernel's limit
        ("interval", 0),
        ("count", 0),
        ("count", 128),
        ("user_timeout", 0),
        ("user_timeout", -0.5),
    ],
)
def test_bad_values_say_which_field_and_what_to_do(field: str, value: float) -> None:
    bad: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=rf"KeepaliveConfig\.{field} .*disabled\(\)"):
        KeepaliveConfig(**bad)


@pytest.mark.parametrize(("field", "value"), [("count", 1.5), ("count", True), ("idle", "30")])
def test_wrong_types_are_rejected(field: str, value: object) -> None:
    bad: dict[str, Any] = {field: value}
    with pytest.raises(TypeError, match=rf"KeepaliveConfig\.{field}"):
        KeepaliveConfig(**bad)


def test_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        KeepaliveConfig().idle = 1  # type: ignore[misc]


def _read_back(sock: socket.socket | trio.socket.SocketType) -> dict[str, int]:
    # Boolean options read back as any non-zero value; normalise them to 1.
    return {
        "nodelay": int(sock.getsockopt(TCP, socket.TCP_NODELAY) != 0),
        "keepalive": int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0),
        "idle": sock.getsockopt(TCP, socket.TCP_KEEPIDLE),
        "interval": sock.getsockopt(TCP, socket.TCP_KEEPINTVL),
        "count": sock.getsockopt(TCP, socket.TCP_KEEPCNT),
        "user_timeout": sock.getsockopt(TCP, socket.TCP_USER_TIMEOUT),
    }


# Values far from the kernel defaults (7200/75/9, keepalive off), so a read-back can only
# match if apply() really set them.
CONFIG = KeepaliveConfig(idle=7, interval=3, count=4)
EXPECTED = {
    "nodelay": 1,
    "keepalive": 1,
    "idle": 7,
    "interval": 3,
    "count": 4,
    "user_timeout": 19_000,
}


@linux_only
def test_apply_to_a_stdlib_socket() -> None:
    with socket.socket() as sock:
        assert _read_back(sock) != EXPECTED
        CONFIG.apply(sock)
        assert _read_back(sock) == EXPECTED


@linux_only
async def test_apply_to_a_connected_trio_socket_stream() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    async with listener:
        port = listener.socket.getsockname()[1]
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            CONFIG.apply(stream.socket)  # what the relay client does
            assert _read_back(stream.socket) == EXPECTED
