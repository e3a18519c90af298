"""One implementation of the keepalive clients, for both httpx families.

``httpx`` 0.28 (over ``httpcore`` 1) and ``httpx2`` (over ``httpcore2``) share one API,
so a `Family` is built from a client module and its httpcore, and the typed
public functions ([`trio_relay.http`][trio_relay.http] for httpx2,
`trio_relay.http.httpx1` for
httpx) are thin wrappers around it.

Why a transport of our own: the keepalive options must reach *every* TCP connection,
proxied ones included. httpcore's proxy pools do not pass ``socket_options`` on to the
connections they open (httpcore 1, and httpcore2 before 2.17.0), but every connection
(direct, through an HTTP proxy, tunnelled, SOCKS) is opened by the pool's *network
backend*, and httpcore's pools take one as a public ``network_backend=`` argument.
httpx's ``HTTPTransport`` does not expose that argument, so `Family` builds the
httpcore pool itself, from public classes and arguments, with a backend that adds the
options, and adapts requests, responses and exceptions between the two layers as a
transport does. Nothing private is touched, so a new httpx release cannot silently drop
the options from proxied connections.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import sniffio

from .._core.keepalive import KeepaliveConfig, SocketOption
from ._proxies import environment_proxies

__all__ = ["Family"]

# Client arguments that only configure the connection layer. httpx ignores them once a
# transport is given, so they must go to the transports we build or they would be lost.
_TRANSPORT_ONLY_KWARGS = ("verify", "cert", "http1", "http2", "limits", "proxy")

# httpcore exception -> the httpx exception of the same name (both families use these).
_EXCEPTION_NAMES = (
    "TimeoutException", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout",
    "NetworkError", "ConnectError", "ReadError", "WriteError", "ProxyError",
    "UnsupportedProtocol", "ProtocolError", "LocalProtocolError", "RemoteProtocolError",
)  # fmt: skip


def _merged(given: Iterable[Any] | None, ours: list[SocketOption]) -> list[Any]:
    merged = list(given or ())
    return merged + [option for option in ours if option not in merged]


def _detached(value: Any) -> Any:
    # Copy containers so nothing handed to httpx is shared with the caller's kwargs. Leaves
    # (SSL contexts, transports, hooks) stay shared: copying those would change meaning.
    if isinstance(value, dict):
        return {key: _detached(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_detached(item) for item in value]
    return value


class _OptionsBackend:
    """A network backend that opens every TCP connection with our options (merged with
    the pool's) through ``inner()``, the backend that does the work.

    One class serves async and sync pools alike: each method returns what the inner
    backend's returns, which for an async pool is the coroutine the pool awaits. (The
    pools only call these three methods; httpcore's backend classes are its typing.)
    """

    def __init__(self, inner: Callable[[], Any], options: list[SocketOption]) -> None:
        self._inner = inner
        self._options = options

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        return self._inner().connect_tcp(
            host, port, timeout, local_address, _merged(socket_options, self._options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> Any:
        # TCP options mean nothing on a Unix socket: pass through untouched.
        return self._inner().connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> Any:
        return self._inner().sleep(seconds)


class Family:
    """The keepalive machinery for one httpx family (see the module docstring)."""

    def __init__(self, httpx: ModuleType, httpcore: ModuleType) -> None:
        self.httpx = httpx
        self.httpcore = httpcore
        self._exceptions: dict[type[Exception], type[Exception]] = {
            getattr(httpcore, name): getattr(httpx, name) for name in _EXCEPTION_NAMES
        }
        trio_backend, anyio_backend = httpcore.TrioBackend(), httpcore.AnyIOBackend()
        sync_backend = httpcore.SyncBackend()

        def async_backend() -> Any:
            # Per call, like httpcore's own auto backend: Trio natively, else anyio.
            library = sniffio.current_async_library()
            return trio_backend if library == "trio" else anyio_backend

        self._async_backend: Callable[[], Any] = async_backend
        self._sync_backend: Callable[[], Any] = lambda: sync_backend
        self._build_classes()

    # --- the clients --------------------------------------------------------------------

    def async_client(self, keepalive: KeepaliveConfig | None, kwargs: Mapping[str, Any]) -> Any:
        return self.httpx.AsyncClient(**self._client_kwargs(keepalive, kwargs, is_async=True))

    def sync_client(self, keepalive: KeepaliveConfig | None, kwargs: Mapping[str, Any]) -> Any:
        return self.httpx.Client(**self._client_kwargs(keepalive, kwargs, is_async=False))

    def transport(
        self,
        options: list[SocketOption],
        *,
        is_async: bool,
        verify: Any = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: Any = None,
        proxy: Any = None,
    ) -> Any:
        """A transport whose every TCP connection carries ``options``."""
        httpx, httpcore = self.httpx, self.httpcore
        if limits is None:  # httpx's documented defaults
            limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        if isinstance(proxy, (str, httpx.URL)):
            proxy = httpx.Proxy(url=proxy)
        prefix = "Async" if is_async else ""
        common: dict[str, Any] = {
            "ssl_context": httpx.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env),
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry,
            "http1": http1,
            "http2": http2,
            "network_backend": _OptionsBackend(
                self._async_backend if is_async else self._sync_backend, options
            ),
        }
        if proxy is None:
            pool = getattr(httpcore, f"{prefix}ConnectionPool")(socket_options=options, **common)
        else:
            url = httpcore.URL(
                scheme=proxy.url.raw_scheme,
                host=proxy.url.raw_host,
                port=proxy.url.port,
                target=proxy.url.raw_path,
            )
            if proxy.url.scheme in ("http", "https"):
                pool = getattr(httpcore, f"{prefix}HTTPProxy")(
                    proxy_url=url,
                    proxy_auth=proxy.raw_auth,
                    proxy_headers=proxy.headers.raw,
                    proxy_ssl_context=proxy.ssl_context,
                    **common,
                )
            elif proxy.url.scheme in ("socks5", "socks5h"):
                pool = getattr(httpcore, f"{prefix}SOCKSProxy")(
                    proxy_url=url, proxy_auth=proxy.raw_auth, **common
                )
            else:
                raise ValueError(
                    f"unsupported proxy scheme {proxy.url.scheme!r}: use http, https, "
                    "socks5 or socks5h"
                )
        return (self._AsyncTransport if is_async else self._SyncTransport)(pool)

    def _client_kwargs(
        self, keepalive: KeepaliveConfig | None, given: Mapping[str, Any], *, is_async: bool
    ) -> dict[str, Any]:
        """The client's keyword arguments, with our transports in place.

        Everything is built into a new dict: an earlier version stored what it built back
        into the caller's kwargs, and an SDK that closed one client then broke the next.
        """
        kwargs = {name: _detached(value) for name, value in given.items()}
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
        transport_kwargs = {
            name: kwargs.pop(name) for name in _TRANSPORT_ONLY_KWARGS if name in kwargs
        }
        # trust_env stays on the client too: it also governs .netrc auth there.
        trust_env = bool(kwargs.get("trust_env", True))

        def build(proxy: Any) -> Any:
            # A fresh transport (and pool) each time: closing one client must never close
            # a pool another client uses.
            return self.transport(
                options,
                is_async=is_async,
                **{**transport_kwargs, "proxy": proxy, "trust_env": trust_env},
            )

        kwargs["transport"] = build(transport_kwargs.get("proxy"))
        if transport_kwargs.get("proxy") is None and trust_env:
            # A custom transport turns off httpx's own environment proxy lookup, so redo
            # it, with transports that carry the options. Caller's mounts win, as in httpx.
            mounts: dict[str, Any] = {
                pattern: None if url is None else build(url)
                for pattern, url in environment_proxies().items()
            }
            mounts.update(kwargs.get("mounts") or {})
            kwargs["mounts"] = mounts
        return kwargs

    # --- the adapter between httpx and httpcore -----------------------------------------

    @contextlib.contextmanager
    def mapped_errors(self) -> Iterator[None]:
        """Re-raise an httpcore exception as the httpx one of the same name (the most
        specific), as SDKs catch httpx's (retries on ``ConnectError``, timeouts ...)."""
        try:
            yield
        except Exception as exc:
            for kind in type(exc).__mro__:
                mapped = self._exceptions.get(kind)
                if mapped is not None:
                    raise mapped(str(exc)) from exc
            raise

    def core_request(self, request: Any) -> Any:
        url = request.url
        return self.httpcore.Request(
            method=request.method,
            url=self.httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )

    def _build_classes(self) -> None:
        family, httpx = self, self.httpx

        class AsyncBody(httpx.AsyncByteStream):  # type: ignore[misc,name-defined]
            def __init__(self, stream: Any) -> None:
                self._stream = stream

            async def __aiter__(self) -> Any:
                with family.mapped_errors():
                    async for part in self._stream:
                        yield part

            async def aclose(self) -> None:
                if hasattr(self._stream, "aclose"):
                    with family.mapped_errors():
                        await self._stream.aclose()

        class SyncBody(httpx.SyncByteStream):  # type: ignore[misc,name-defined]
            def __init__(self, stream: Any) -> None:
                self._stream = stream

            def __iter__(self) -> Any:
                with family.mapped_errors():
                    yield from self._stream

            def close(self) -> None:
                if hasattr(self._stream, "close"):
                    with family.mapped_errors():
                        self._stream.close()

        class AsyncKeepaliveTransport(httpx.AsyncBaseTransport):  # type: ignore[misc,name-defined]
            """An httpx transport over an httpcore pool with the options backend."""

            def __init__(self, pool: Any) -> None:
                self.pool = pool

            async def __aenter__(self) -> Any:
                await self.pool.__aenter__()
                return self

            async def __aexit__(self, *exc_info: Any) -> None:
                with family.mapped_errors():
                    await self.pool.__aexit__(*exc_info)

            async def handle_async_request(self, request: Any) -> Any:
                with family.mapped_errors():
                    response = await self.pool.handle_async_request(family.core_request(request))
                return httpx.Response(
                    status_code=response.status,
                    headers=response.headers,
                    stream=AsyncBody(response.stream),
                    extensions=response.extensions,
                )

            async def aclose(self) -> None:
                await self.pool.aclose()

        class SyncKeepaliveTransport(httpx.BaseTransport):  # type: ignore[misc,name-defined]
            """The blocking twin of the async transport."""

            def __init__(self, pool: Any) -> None:
                self.pool = pool

            def __enter__(self) -> Any:
                self.pool.__enter__()
                return self

            def __exit__(self, *exc_info: Any) -> None:
                with family.mapped_errors():
                    self.pool.__exit__(*exc_info)

            def handle_request(self, request: Any) -> Any:
                with family.mapped_errors():
                    response = self.pool.handle_request(family.core_request(request))
                return httpx.Response(
                    status_code=response.status,
                    headers=response.headers,
                    stream=SyncBody(response.stream),
                    extensions=response.extensions,
                )

            def close(self) -> None:
                self.pool.close()

        self._AsyncTransport: Callable[[Any], Any] = AsyncKeepaliveTransport
        self._SyncTransport: Callable[[Any], Any] = SyncKeepaliveTransport
