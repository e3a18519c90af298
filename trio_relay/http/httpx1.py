"""The same clients for the ``httpx`` 0.28 family, for SDKs that still take an
``httpx.AsyncClient`` / ``httpx.Client`` (``openai`` 1.x, ``anthropic`` 0.x, ...).

Install with ``pip install 'trio_relay[httpx]'``. Every function behaves exactly as its
namesake in :mod:`trio_relay.http` (same keepalive options, proxy handling, kwargs
rules and timeouts); only the client class differs::

    from trio_relay.http.httpx1 import llm_client
    client = OldSDK(http_client=llm_client())      # an httpx.AsyncClient
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

from .._core.keepalive import KeepaliveConfig
from ._family import Family
from ._presets import LLM_CONNECT_TIMEOUT, LLM_POOL_TIMEOUT, LLM_WRITE_TIMEOUT, refuse_timeout

__all__ = ["keepalive_client", "keepalive_sync_client", "llm_client", "llm_sync_client"]

_FAMILY = Family(httpx, httpcore)


def keepalive_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose TCP connections detect a dead peer; see
    :func:`trio_relay.http.keepalive_client`."""
    client: httpx.AsyncClient = _FAMILY.async_client(keepalive, httpx_kwargs)
    return client


def keepalive_sync_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx.Client:
    """An ``httpx.Client``; see :func:`trio_relay.http.keepalive_sync_client`."""
    client: httpx.Client = _FAMILY.sync_client(keepalive, httpx_kwargs)
    return client


def _llm_timeout(connect: float, write: float, pool: float) -> httpx.Timeout:
    return httpx.Timeout(connect=connect, read=None, write=write, pool=pool)


def llm_client(
    *,
    keepalive: KeepaliveConfig | None = None,
    connect_timeout: float = LLM_CONNECT_TIMEOUT,
    write_timeout: float = LLM_WRITE_TIMEOUT,
    pool_timeout: float = LLM_POOL_TIMEOUT,
    **httpx_kwargs: Any,
) -> httpx.AsyncClient:
    """:func:`keepalive_client` with no read timeout; see
    :func:`trio_relay.http.llm_client`."""
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
) -> httpx.Client:
    """The blocking twin of :func:`llm_client`; see :func:`trio_relay.http.llm_sync_client`."""
    refuse_timeout(httpx_kwargs, "llm_sync_client")
    timeout = _llm_timeout(connect_timeout, write_timeout, pool_timeout)
    return keepalive_sync_client(keepalive=keepalive, timeout=timeout, **httpx_kwargs)
