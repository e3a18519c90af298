"""The four public client functions, written once for both httpx families.

[`trio_relay.http`][trio_relay.http] (httpx2) and
`trio_relay.http.httpx1` (httpx 0.28) each export
the bound methods of one `ClientFunctions` (as the standard library's ``random``
exports the methods of its one ``Random``), typed with that family's client classes: the
two families share one set of rules, defaults and docs, and cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Generic, TypeVar

from .._core.keepalive import KeepaliveConfig
from ._family import Family

__all__ = ["LLM_CONNECT_TIMEOUT", "LLM_POOL_TIMEOUT", "LLM_WRITE_TIMEOUT", "ClientFunctions"]

LLM_CONNECT_TIMEOUT = 10.0
"""A provider that cannot be reached in 10 s is better retried than waited for."""
LLM_WRITE_TIMEOUT = 30.0
"""Sending a large prompt over a slow uplink."""
LLM_POOL_TIMEOUT = 30.0
"""Waiting for a free connection when many requests share the client."""

AsyncClientT = TypeVar("AsyncClientT")
SyncClientT = TypeVar("SyncClientT")


def refuse_timeout(kwargs: Mapping[str, Any], name: str) -> None:
    # A whole-request timeout would bring back the read timeout the preset removes.
    if "timeout" in kwargs:
        raise TypeError(
            f"{name}() sets the timeouts itself (connect, write, pool; never read): pass "
            "connect_timeout=, write_timeout= or pool_timeout=, or use keepalive_client("
            "timeout=...) for a client with a read timeout"
        )


class ClientFunctions(Generic[AsyncClientT, SyncClientT]):
    """``keepalive_client``, ``keepalive_sync_client``, ``llm_client`` and
    ``llm_sync_client`` of one family, returning its ``AsyncClient`` / ``Client``."""

    def __init__(self, httpx: ModuleType, httpcore: ModuleType) -> None:
        self._httpx = httpx
        self._family = Family(httpx, httpcore)

    def __repr__(self) -> str:  # what help() and a bound method's repr show of the family
        return f"ClientFunctions({self._httpx.__name__})"

    def keepalive_client(
        self, *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
    ) -> AsyncClientT:
        """An ``AsyncClient`` whose TCP connections detect a dead peer (``httpx2``'s
        from [`trio_relay.http`][trio_relay.http], ``httpx``'s from
        `trio_relay.http.httpx1`).

        Takes the same keyword arguments as ``AsyncClient``. Every connection gets
        ``keepalive.socket_options()`` (default [`KeepaliveConfig`][trio_relay.KeepaliveConfig]:
        idle 30 s, then
        3 probes 10 s apart). Give the result to an SDK, e.g.
        ``AsyncOpenAI(http_client=...)`` (one client per SDK client: closing the SDK closes
        it), or close it yourself (``async with`` or ``await client.aclose()``).

        * ``httpx_kwargs`` is never modified, and dicts or lists inside it are copied, so
          one kwargs dict can build any number of clients.
        * Proxies from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
          ``NO_PROXY``) are honoured as httpx would when ``trust_env`` is true (the
          default), and connections through a proxy carry the same options; so does an
          explicit ``proxy=``.
        * ``verify``, ``cert``, ``http1``, ``http2``, ``limits``, ``trust_env`` and
          ``proxy`` configure the transports built here.
        * A ``transport=`` you pass is used as is (no keepalive is added to it, and, as in
          httpx, environment proxies are then ignored). ``mounts=`` you pass take
          precedence over the environment's proxy mounts.
        """
        client: AsyncClientT = self._family.async_client(keepalive, httpx_kwargs)
        return client

    def keepalive_sync_client(
        self, *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
    ) -> SyncClientT:
        """The blocking twin of `keepalive_client`: a ``Client`` (for
        ``OpenAI(http_client=...)``) with the same options (``keepalive``, and
        ``httpx_kwargs`` for ``Client``), proxy handling and rules."""
        client: SyncClientT = self._family.sync_client(keepalive, httpx_kwargs)
        return client

    def llm_client(
        self,
        *,
        keepalive: KeepaliveConfig | None = None,
        connect_timeout: float = LLM_CONNECT_TIMEOUT,
        write_timeout: float = LLM_WRITE_TIMEOUT,
        pool_timeout: float = LLM_POOL_TIMEOUT,
        **httpx_kwargs: Any,
    ) -> AsyncClientT:
        """`keepalive_client` with timeouts for an LLM provider.

        Connect, write and pool timeouts, but **no read timeout**: a slow first token or a
        long pause in a stream is normal for a model, and a read timeout (httpx's default
        is 5 s) would kill it. A dead provider is found by keepalive instead (``idle +
        interval * count``, 60 s by default), and a stuck one by wrapping the stream in
        [`stall_timeout`][trio_relay.http.stall_timeout]. The SDKs use a client's own timeout when
        it is not httpx's default, so ``AsyncOpenAI(http_client=llm_client())`` and
        ``AsyncAnthropic(http_client=llm_client())`` inherit these.

        Args:
            keepalive: The TCP keepalive of every connection (default
                [`KeepaliveConfig`][trio_relay.KeepaliveConfig]()).
            connect_timeout: Seconds to open a connection (default 10).
            write_timeout: Seconds to send a request's bytes (default 30).
            pool_timeout: Seconds to wait for a free connection of the pool (default 30).
            httpx_kwargs: Any other keyword of ``AsyncClient`` (``base_url``, ``headers``,
                ``proxy``, ...), as for `keepalive_client`; ``timeout=`` is refused
                (these are the timeouts).
        """
        refuse_timeout(httpx_kwargs, "llm_client")
        timeout = self._llm_timeout(connect_timeout, write_timeout, pool_timeout)
        return self.keepalive_client(keepalive=keepalive, timeout=timeout, **httpx_kwargs)

    def llm_sync_client(
        self,
        *,
        keepalive: KeepaliveConfig | None = None,
        connect_timeout: float = LLM_CONNECT_TIMEOUT,
        write_timeout: float = LLM_WRITE_TIMEOUT,
        pool_timeout: float = LLM_POOL_TIMEOUT,
        **httpx_kwargs: Any,
    ) -> SyncClientT:
        """The blocking twin of `llm_client` (for ``OpenAI(http_client=...)``), with the
        same ``keepalive``, ``connect_timeout``, ``write_timeout``, ``pool_timeout`` and
        ``httpx_kwargs`` (for ``Client``); guard its streams with
        [`sync_stall_timeout`][trio_relay.http.sync_stall_timeout]."""
        refuse_timeout(httpx_kwargs, "llm_sync_client")
        timeout = self._llm_timeout(connect_timeout, write_timeout, pool_timeout)
        return self.keepalive_sync_client(keepalive=keepalive, timeout=timeout, **httpx_kwargs)

    def _llm_timeout(self, connect: float, write: float, pool: float) -> Any:
        return self._httpx.Timeout(connect=connect, read=None, write=write, pool=pool)
