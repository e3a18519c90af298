"""TCP keepalive settings: one provider for every socket trio_relay touches.

A peer that vanishes without a FIN or RST (power loss, a NAT or firewall dropping its
state, a cable pulled) leaves an idle TCP connection open forever: the kernel has nothing
to send, so it never learns the peer is gone, and a reader waits until the process dies.
TCP keepalive makes the kernel probe an idle connection and tear it down when the probes
go unanswered; ``TCP_USER_TIMEOUT`` does the same for a connection whose *sent* data is
never acknowledged. [`KeepaliveConfig`][trio_relay.KeepaliveConfig] turns four numbers into the
socket options
that do this on the current platform, so the relay's WebSocket and the HTTP client used for
an LLM provider get exactly the same settings.

Sans-I/O: this module only computes options and calls ``setsockopt`` on a socket it is
given. It imports no Trio and opens nothing.
"""

from __future__ import annotations

import math
import socket
import sys
from dataclasses import dataclass
from typing import Protocol

__all__ = ["KeepaliveConfig", "SocketOption", "SupportsSetsockopt"]

SocketOption = tuple[int, int, int]
"""``(level, option, value)``, the shape httpcore's ``socket_options=`` expects."""

# Linux refuses larger values with EINVAL (MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL,
# MAX_TCP_KEEPCNT). Checking here turns a confusing connect-time OSError into a clear
# error when the config is built.
_MAX_IDLE_OR_INTERVAL_S = 32767
_MAX_COUNT = 127
_MAX_USER_TIMEOUT_MS = 2**31 - 1  # the kernel stores it in a signed int


class SupportsSetsockopt(Protocol):
    """Anything with ``setsockopt(level, option, value)``: a stdlib socket, a Trio socket,
    or a ``trio.SocketStream``."""

    def setsockopt(self, level: int, option: int, value: int, /) -> object: ...


def _kernel_seconds(seconds: float) -> int:
    # The kernel takes whole seconds. Rounding *up* (never to 0) keeps the promise that
    # detection takes no less than what was asked, and 0 would be rejected anyway.
    return max(1, math.ceil(seconds))


@dataclass(frozen=True, slots=True)  # no __dict__: one per relay config
class KeepaliveConfig:
    """How fast a silent TCP peer is declared dead.

    After ``idle`` seconds without traffic the kernel sends a probe, then one every
    ``interval`` seconds; after ``count`` unanswered probes the connection fails, so a dead
    idle peer is found within [`detection_time`][trio_relay.KeepaliveConfig.detection_time] =
    ``idle + interval * count`` seconds
    (60 s with the defaults, the contract's reference timings). Pending reads then fail
    instead of hanging.

    ``user_timeout`` (Linux ``TCP_USER_TIMEOUT``) bounds how long *sent* data may stay
    unacknowledged before the connection fails, which keepalive alone does not cover
    (probes are only sent on an idle connection). ``None`` derives it from the keepalive
    numbers so both paths agree. Note that on Linux, once it is set, it also replaces
    ``count`` as the keepalive give-up rule: an explicit value larger than
    [`detection_time`][trio_relay.KeepaliveConfig.detection_time] delays detection of an idle peer
    to about ``user_timeout``.

    Values are in seconds; the kernel gets them rounded up to whole seconds (minimum 1).
    ``TCP_NODELAY`` is always included, enabled or not: small chat frames and streamed
    tokens must not wait for Nagle's algorithm.
    """

    idle: float = 30
    interval: float = 10
    count: int = 3
    user_timeout: float | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        _check_seconds("idle", self.idle, _MAX_IDLE_OR_INTERVAL_S)
        _check_seconds("interval", self.interval, _MAX_IDLE_OR_INTERVAL_S)
        if isinstance(self.count, bool) or not isinstance(self.count, int):
            raise TypeError(
                f"KeepaliveConfig.count must be a whole number of probes, got {self.count!r}"
            )
        if not 1 <= self.count <= _MAX_COUNT:
            raise ValueError(
                f"KeepaliveConfig.count must be between 1 and {_MAX_COUNT} probes, got "
                f"{self.count}; use KeepaliveConfig.disabled() to turn keepalive off"
            )
        if self.user_timeout is not None:
            _check_seconds("user_timeout", self.user_timeout, _MAX_USER_TIMEOUT_MS / 1000)

    @classmethod
    def disabled(cls) -> KeepaliveConfig:
        """No keepalive: only ``TCP_NODELAY`` is set. A dead idle peer is never detected
        by TCP; only opt out if something above TCP (a ping, a read timeout) does it."""
        return cls(enabled=False)

    @property
    def detection_time(self) -> float:
        """Worst-case seconds to notice a dead idle peer: ``idle + interval * count``
        (as the kernel sees them, i.e. rounded up to whole seconds); ``inf`` when
        disabled."""
        if not self.enabled:
            return math.inf
        return _kernel_seconds(self.idle) + _kernel_seconds(self.interval) * self.count

    def _user_timeout_ms(self) -> int:
        # Only meaningful while enabled (detection_time is finite then).
        if self.user_timeout is None:
            # Clamped: extreme keepalive numbers can exceed what the kernel can store.
            return min(int(self.detection_time * 1000), _MAX_USER_TIMEOUT_MS)
        return max(1, math.ceil(self.user_timeout * 1000))

    def socket_options(self) -> list[SocketOption]:
        """The ``(level, option, value)`` triples for this platform.

        Options the platform's ``socket`` module does not offer are skipped silently:
        keepalive is best effort, and a client that cannot tune it is still a client.
        """
        options: list[SocketOption] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        if not self.enabled:
            return options
        options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
        tcp_values = [
            (_idle_option(), _kernel_seconds(self.idle)),
            (getattr(socket, "TCP_KEEPINTVL", None), _kernel_seconds(self.interval)),
            (getattr(socket, "TCP_KEEPCNT", None), self.count),
            (getattr(socket, "TCP_USER_TIMEOUT", None), self._user_timeout_ms()),
        ]
        options.extend(
            (socket.IPPROTO_TCP, option, value)
            for option, value in tcp_values
            if option is not None
        )
        return options

    def apply(self, sock: SupportsSetsockopt) -> None:
        """Set [`socket_options`][trio_relay.KeepaliveConfig.socket_options] on a socket you
        already hold (stdlib or Trio socket,
        or a ``trio.SocketStream``). Raises ``OSError`` if the socket refuses an option,
        e.g. because it is closed or not TCP."""
        for level, option, value in self.socket_options():
            sock.setsockopt(level, option, value)


def _idle_option() -> int | None:
    # Linux, Windows and the BSDs call it TCP_KEEPIDLE. macOS calls the same knob
    # TCP_KEEPALIVE; elsewhere that name can mean something else, so only trust it there.
    idle = getattr(socket, "TCP_KEEPIDLE", None)
    if idle is None and sys.platform == "darwin":
        idle = getattr(socket, "TCP_KEEPALIVE", None)
    return idle


def _check_seconds(field: str, value: float, maximum: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"KeepaliveConfig.{field} must be a number of seconds, got {value!r}")
    if not 0 < value <= maximum:  # also rejects NaN
        raise ValueError(
            f"KeepaliveConfig.{field} must be more than 0 and at most {maximum:g} seconds, "
            f"got {value!r}; use KeepaliveConfig.disabled() to turn keepalive off"
        )
