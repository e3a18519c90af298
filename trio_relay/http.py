"""HTTP clients that notice a dead peer, and a guard for streams that go quiet.

An LLM provider that vanishes mid-stream (no FIN, no RST) leaves a plain httpx client
blocked on a read forever. Two layers fix that:

* :func:`keepalive_client` / :func:`keepalive_sync_client` build an httpx client whose
  every connection, proxied ones included, carries the TCP keepalive options of a
  :class:`~trio_relay.KeepaliveConfig`, so the kernel fails the read once the peer has been
  silent for ``idle + interval * count`` seconds.
* :func:`stall_timeout` wraps a stream's iterator and gives up when no chunk arrives for a
  given time, for peers that are alive but stuck (keepalive probes are answered by the
  peer's kernel, not by the application).
"""

from __future__ import annotations

import ipaddress
import urllib.request
import warnings
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import httpcore
import httpx
import trio

from ._core.keepalive import KeepaliveConfig, SocketOption

__all__ = ["StreamStalled", "keepalive_client", "keepalive_sync_client", "stall_timeout"]

# Client arguments that only configure the connection layer. httpx ignores them once a
# transport is given, so they must go to the transports we build or they would be lost.
_TRANSPORT_ONLY_KWARGS = ("verify", "cert", "http1", "http2", "limits", "proxy")

_T = TypeVar("_T")
_Transport = TypeVar("_Transport", httpx.AsyncBaseTransport, httpx.BaseTransport)


def keepalive_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose TCP connections detect a dead peer.

    Takes the same keyword arguments as ``httpx.AsyncClient``. Every connection gets
    ``keepalive.socket_options()`` (default :class:`KeepaliveConfig()`: idle 30 s, then 3
    probes 10 s apart). Give the result to an SDK, e.g. ``AsyncOpenAI(http_client=...)``,
    and close it yourself when done (``async with`` or ``await client.aclose()``).

    * ``httpx_kwargs`` is never modified, and dicts or lists inside it are copied, so one
      kwargs dict can build any number of clients.
    * Proxies from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
      ``NO_PROXY``) are honoured as httpx would when ``trust_env`` is true (the default),
      and connections through a proxy carry the same options; so does an explicit
      ``proxy=``.
    * ``verify``, ``cert``, ``http1``, ``http2``, ``limits``, ``trust_env`` and ``proxy``
      configure the transports built here.
    * A ``transport=`` you pass is used as is (no keepalive is added to it, and, as in
      httpx, environment proxies are then ignored). ``mounts=`` you pass take precedence
      over the environment's proxy mounts.
    """
    kwargs = _client_kwargs(keepalive, httpx_kwargs, _async_transport)
    return httpx.AsyncClient(**kwargs)


def keepalive_sync_client(
    *, keepalive: KeepaliveConfig | None = None, **httpx_kwargs: Any
) -> httpx.Client:
    """The blocking twin of :func:`keepalive_client`: an ``httpx.Client`` with the same
    keepalive options, proxy handling and argument rules."""
    kwargs = _client_kwargs(keepalive, httpx_kwargs, _sync_transport)
    return httpx.Client(**kwargs)


def _client_kwargs(
    keepalive: KeepaliveConfig | None,
    httpx_kwargs: Mapping[str, Any],
    make_transport: Callable[..., _Transport],
) -> dict[str, Any]:
    """The client's keyword arguments, with our transports in place.

    Everything is built into a new dict: an earlier version stored what it built back into
    the caller's kwargs, and an SDK that closed one client then broke the next.
    """
    kwargs = {name: _detached(value) for name, value in httpx_kwargs.items()}
    if kwargs.get("transport") is not None:
        return kwargs
    kwargs.pop("transport", None)

    if keepalive is None:
        keepalive = KeepaliveConfig()
    elif not isinstance(keepalive, KeepaliveConfig):
        raise TypeError(
            f"keepalive must be a trio_relay.KeepaliveConfig (or None for the defaults), "
            f"got {keepalive!r}"
        )
    options = keepalive.socket_options()
    transport_kwargs = {name: kwargs.pop(name) for name in _TRANSPORT_ONLY_KWARGS if name in kwargs}
    # trust_env stays on the client too: it also governs .netrc auth there.
    trust_env = bool(kwargs.get("trust_env", True))
    transport_kwargs["trust_env"] = trust_env

    def build(proxy: Any) -> _Transport:
        # A fresh transport (and connection pool) each time: closing one client must never
        # close a pool another client uses.
        return make_transport(options, **{**transport_kwargs, "proxy": proxy})

    kwargs["transport"] = build(transport_kwargs.get("proxy"))
    if transport_kwargs.get("proxy") is None and trust_env:
        # A custom transport turns off httpx's own environment proxy lookup, so redo it,
        # with transports that carry the options. Caller's mounts win, as in httpx.
        mounts: dict[str, _Transport | None] = {
            pattern: None if url is None else build(url)
            for pattern, url in _environment_proxies().items()
        }
        mounts.update(kwargs.get("mounts") or {})
        kwargs["mounts"] = mounts
    return kwargs


# httpcore (1.0.x) drops ``socket_options`` for connections made through an HTTP proxy
# (``HTTPProxy.create_connection`` does not pass them on). Every connection, direct,
# proxied or SOCKS, is opened by the pool's network backend, so a backend that adds the
# options is the one place that covers them all. Reaching it means touching the private
# ``_pool._network_backend``; if a future httpx/httpcore moves it, we warn instead of
# failing, and direct connections still get the options through ``socket_options=``.


def _async_transport(options: list[SocketOption], **kwargs: Any) -> httpx.AsyncHTTPTransport:
    transport = httpx.AsyncHTTPTransport(socket_options=options, **kwargs)
    _wrap_network_backend(transport, lambda inner: _AsyncOptionsBackend(inner, options))
    return transport


def _sync_transport(options: list[SocketOption], **kwargs: Any) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(socket_options=options, **kwargs)
    _wrap_network_backend(transport, lambda inner: _SyncOptionsBackend(inner, options))
    return transport


def _wrap_network_backend(transport: object, wrap: Callable[[Any], object]) -> None:
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if inner is None:
        warnings.warn(
            "trio_relay.http cannot reach httpcore's network backend in this httpx "
            "version, so connections through a proxy may lack keepalive options. "
            "Please report it with your httpx and httpcore versions.",
            RuntimeWarning,
            stacklevel=6,  # the caller of keepalive_client()
        )
        return
    setattr(pool, "_network_backend", wrap(inner))  # noqa: B010 (private on purpose)


def _merged(given: Iterable[Any] | None, ours: list[SocketOption]) -> list[Any]:
    merged = list(given or ())
    return merged + [option for option in ours if option not in merged]


class _AsyncOptionsBackend(httpcore.AsyncNetworkBackend):
    """Delegates to ``inner``, adding our options to every TCP connection."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, options: list[SocketOption]):
        self._inner = inner
        self._options = options

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            host, port, timeout, local_address, _merged(socket_options, self._options)
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        # TCP options mean nothing on a Unix socket: pass through untouched.
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _SyncOptionsBackend(httpcore.NetworkBackend):
    """The blocking twin of :class:`_AsyncOptionsBackend`."""

    def __init__(self, inner: httpcore.NetworkBackend, options: list[SocketOption]):
        self._inner = inner
        self._options = options

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return self._inner.connect_tcp(
            host, port, timeout, local_address, _merged(socket_options, self._options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _detached(value: Any) -> Any:
    # Copy containers so nothing handed to httpx is shared with the caller's kwargs. Leaves
    # (SSL contexts, transports, hooks) stay shared: copying those would change meaning.
    if isinstance(value, dict):
        return {key: _detached(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_detached(item) for item in value]
    return value


def _environment_proxies() -> dict[str, str | None]:
    """Mount patterns from the proxy environment variables, by httpx's own rules.

    Mirrors ``httpx._utils.get_environment_proxies`` (private, so not imported): a proxy
    URL per scheme, and ``None`` (no proxy) for each ``NO_PROXY`` entry.
    """
    found = urllib.request.getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        url = found.get(scheme)
        if url:
            mounts[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for entry in (host.strip() for host in found.get("no", "").split(",")):
        if entry == "*":
            return {}
        if "://" in entry:
            mounts[entry] = None
        elif _is_ip(entry, ipaddress.IPv4Address):
            mounts[f"all://{entry}"] = None
        elif _is_ip(entry, ipaddress.IPv6Address):
            mounts[f"all://[{entry}]"] = None
        elif entry.lower() == "localhost":
            mounts[f"all://{entry}"] = None
        elif entry:
            # "example.com" covers example.com and its subdomains, as in curl.
            mounts[f"all://*{entry}"] = None
    return mounts


def _is_ip(host: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True


class StreamStalled(Exception):
    """A stream delivered nothing for longer than its :func:`stall_timeout`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"no data arrived for {seconds:g} s, so the stream was abandoned: the peer is "
            "gone or stuck. Retry the request, or give stall_timeout() more seconds if the "
            "server can legitimately stay quiet this long."
        )
        self.seconds = seconds


async def stall_timeout(source: AsyncIterable[_T], seconds: float) -> AsyncGenerator[_T, None]:
    """Yield from ``source``, raising :exc:`StreamStalled` if any next item (the first
    included) takes more than ``seconds`` to arrive.

    For example ``async for chunk in stall_timeout(response.aiter_bytes(), 60): ...``.
    The wrapped iterator is closed (``aclose``) when this generator ends, however it ends.
    If you may stop iterating early, wrap the generator in ``contextlib.aclosing`` so that
    happens at once rather than when it is garbage collected.
    """
    if not seconds > 0:
        raise ValueError(f"stall_timeout needs seconds > 0, got {seconds!r}")
    iterator = aiter(source)
    try:
        while True:
            # Only the wait for the next item is inside the cancel scope: yielding inside
            # it would let the deadline fire in the consumer's code instead.
            with trio.move_on_after(seconds) as waiting:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
            if waiting.cancelled_caught:
                raise StreamStalled(seconds)
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
