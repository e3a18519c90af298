"""HTTP clients that notice a dead peer, and guards for streams that go quiet.

An LLM provider that vanishes mid-stream (no FIN, no RST) leaves a plain HTTP client
blocked on a read forever. Two layers fix that:

* `keepalive_client` /
`keepalive_sync_client` build an ``httpx2`` client
  (the client ``openai`` 3.x and ``anthropic`` 2.x take) whose every connection, proxied
  ones included, carries the TCP keepalive options of a
  [`KeepaliveConfig`][trio_relay.KeepaliveConfig],
  so the kernel fails the read once the peer has been silent for ``idle + interval *
  count`` seconds. `llm_client` /
  `llm_sync_client` are the same with
  timeouts fit for a model: no read timeout.
* [`stall_timeout`][trio_relay.http.stall_timeout] /
[`sync_stall_timeout`][trio_relay.http.sync_stall_timeout] wrap a stream and give up when no
  chunk arrives for a given time, for peers that are alive but stuck (keepalive probes
  are answered by the peer's kernel, not by the application).

The ``httpx`` 0.28 family has the same functions in
`trio_relay.http.httpx1`.
Neither family is a dependency of the relay: install ``trio_relay[httpx2]`` or
``trio_relay[httpx]``. The httpx2 functions are imported on first use, so this module
(and its stall guards) also imports without httpx2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core.extras import install_hint
from ._stall import StreamStalled, stall_timeout, sync_stall_timeout

if TYPE_CHECKING:
    from ._httpx2 import keepalive_client, keepalive_sync_client, llm_client, llm_sync_client

__all__ = [
    "StreamStalled",
    "keepalive_client",
    "keepalive_sync_client",
    "llm_client",
    "llm_sync_client",
    "stall_timeout",
    "sync_stall_timeout",
]

_HTTPX2_NAMES = frozenset({"keepalive_client", "keepalive_sync_client", "llm_client",
                           "llm_sync_client"})  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _HTTPX2_NAMES:
        try:
            from . import _httpx2
        except ImportError as exc:
            raise ImportError(
                f"trio_relay.http.{name} builds an httpx2 client, and httpx2 is not "
                f"installed: {install_hint('httpx2')}; or use "
                f"trio_relay.http.httpx1.{name} with httpx 0.28"
            ) from exc
        return getattr(_httpx2, name)
    raise AttributeError(f"module 'trio_relay.http' has no attribute {name!r}")
