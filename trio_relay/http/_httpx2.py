"""The ``httpx2`` family (what ``openai`` 3.x and ``anthropic`` 2.x take): the typed
public functions of :mod:`trio_relay.http`. Imported only when one of them is first used,
so ``import trio_relay`` works without httpx2 installed."""

from __future__ import annotations

from typing import Any

import httpcore2
import httpx2

from .._core.keepalive import KeepaliveConfig
from ._family import Family
from ._presets import LLM_CONNECT_TIMEOUT, LLM_POOL_TIMEOUT, LLM_WRITE_TIMEOUT, refuse_timeout

__all__ = ["keepalive_client", "keepalive_sync_client", "llm_client", "llm_sync_client"]

_FAMILY = Family(httpx2, httpcore2)


def keepalive_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose TCP connections detect a dead peer.

    Takes the same keyword arguments as ``httpx2.AsyncClient``. Every connection gets
    ``keepalive.socket_options()`` (default :class:`KeepaliveConfig()`: idle 30 s, then 3
    probes 10 s apart). Give the result to an SDK, e.g. ``AsyncOpenAI(http_client=...)``
    (one client per SDK client: closing the SDK closes it), or close it yourself
    (``async with`` or ``await client.aclose()``).

    * ``httpx_kwargs`` is never modified, and dicts or lists inside it are copied, so one
      kwargs dict can build any number of clients.
    * Proxies from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
      ``NO_PROXY``) are honoured as httpx2 would when ``trust_env`` is true (the
      default), and connections through a proxy carry the same options; so does an
      explicit ``proxy=``.
    * ``verify``, ``cert``, ``http1``, ``http2``, ``limits``, ``trust_env`` and ``proxy``
      configure the transports built here.
    * A ``transport=`` you pass is used as is (no keepalive is added to it, and, as in
      httpx2, environment proxies are then ignored). ``mounts=`` you pass take precedence
      over the environment's proxy mounts.
    """
    client: httpx2.AsyncClient = _FAMILY.async_client(keepalive, httpx_kwargs)
    return client


def keepalive_sync_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx2.Client:
    """The blocking twin of :func:`keepalive_client`: an ``httpx2.Client`` (for
    ``OpenAI(http_client=...)``) with the same options, proxy handling and rules."""
    client: httpx2.Client = _FAMILY.sync_client(keepalive, httpx_kwargs)
    return client


def _llm_timeout(connect: float, write: float, pool: float) -> httpx2.Timeout:
    return httpx2.Timeout(connect=connect, read=None, write=write, pool=pool)


def llm_client(
    *,
    keepalive: KeepaliveConfig | None = None,
    connect_timeout: float = LLM_CONNECT_TIMEOUT,
    write_timeout: float = LLM_WRITE_TIMEOUT,
    pool_timeout: float = LLM_POOL_TIMEOUT,
    **httpx_kwargs: Any,
) -> httpx2.AsyncClient:
    """:func:`keepalive_client` with timeouts for an LLM provider.

    Connect, write and pool timeouts, but **no read timeout**: a slow first token or a
    long pause in a stream is normal for a model, and a read timeout (httpx2's default is
    5 s) would kill it. A dead provider is found by keepalive instead (``idle + interval
    * count``, 60 s by default), and a stuck one by wrapping the stream in
    :func:`~trio_relay.http.stall_timeout`. The SDKs use a client's own timeout when it
    is not httpx2's default, so ``AsyncOpenAI(http_client=llm_client())`` and
    ``AsyncAnthropic(http_client=llm_client())`` inherit these.
    """
    refuse_timeout(httpx_kwargs, "llm_client")
    timeout = _llm_timeout(connect_timeout, write_timeout, pool_timeout)
    return keepalive_client(keepalive=keepalive, timeout=timeout, **httpx_kwargs)


def llm_sync_client(
    *,
    keepalive: KeepaliveConfig | None = None,
    connect_timeout: float = LLM_CONNECT_TIMEOUT,
    write_timeout: float = LLM_WRITE_TIMEOUT,
    pool_timeout: float = LLM_POOL_TIMEOUT,
    **httpx_kwargs: Any,
) -> httpx2.Client:
    """The blocking twin of :func:`llm_client` (for ``OpenAI(http_client=...)``); guard
    its streams with :func:`~trio_relay.http.sync_stall_timeout`."""
    refuse_timeout(httpx_kwargs, "llm_sync_client")
    timeout = _llm_timeout(connect_timeout, write_timeout, pool_timeout)
    return keepalive_sync_client(keepalive=keepalive, timeout=timeout, **httpx_kwargs)
