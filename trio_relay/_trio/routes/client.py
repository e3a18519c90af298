"""The relay's HTTP client for the connector's routes (docs/protocol.md, "HTTP routes"):
media uploads and downloads, the relevance policy.

It is the keepalive ``httpx2`` client of [`trio_relay.http`][trio_relay.http] (same provider as the
relay socket), created on first use so that a relay that never calls a route needs no
httpx2 at all. Each request that may carry the bearer token gets a freshly minted one,
exactly like the upgrade; redirects are never followed with it (the client follows none
itself: `ConnectorHttp.send` follows them by hand, without the token). Server
errors (5xx) and transport failures are retried with a doubling backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import trio

from ..._core.extras import install_hint
from ..._core.media import ConnectorRoutes
from ..._core.settings import RoutesSettings

if TYPE_CHECKING:
    import httpx2

__all__ = ["ATTEMPTS", "ConnectorHttp"]

logger = logging.getLogger("trio_relay")

ATTEMPTS = 3
"""Tries of one request when the connector answers 5xx or the transport fails."""
FIRST_RETRY_DELAY = 0.5
"""Then 1 s: the whole ladder stays well under a handler's patience."""
MAX_REDIRECTS = 5


class ConnectorHttp:
    """One relay's client for its connector's HTTP routes; close with `aclose`."""

    __slots__ = ("_client", "_mint", "_name", "_settings", "routes")  # no __dict__: one per relay

    def __init__(
        self,
        routes: ConnectorRoutes,
        mint: Callable[[], str | None],
        settings: RoutesSettings,
        name: str = "",
    ) -> None:
        self._name = name
        """The relay's, in this client's records (it is called from the user's tasks too)."""
        self.routes = routes
        self._mint = mint
        self._settings = settings
        self._client: httpx2.AsyncClient | None = None

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            httpx2 = _import_httpx2()
            from ...http import keepalive_client

            settings = self._settings
            self._client = keepalive_client(
                keepalive=settings.keepalive,
                verify=settings.ssl_context if settings.ssl_context is not None else True,
                follow_redirects=False,
                # No whole-request read timeout: the stall guard is per read.
                timeout=httpx2.Timeout(
                    connect=settings.connect_timeout,
                    read=settings.stall_timeout,
                    write=settings.stall_timeout,
                    pool=settings.connect_timeout,
                ),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def _headers(self, url: str, extra: dict[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        if url in (self.routes.media, self.routes.policy) or self.routes.is_own_media(url):
            token = self._mint()
            if token is not None:
                headers["authorization"] = f"Bearer {token}"
        return headers

    async def send(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        """Send with retries; return the (streaming) final response, which the caller
        closes. Redirects of a GET are followed without the bearer token. Raises
        ``httpx2.TransportError`` once every attempt failed."""
        httpx2 = _import_httpx2()

        hops = 0
        bearer_allowed = True
        delay = FIRST_RETRY_DELAY
        attempt = 1
        while True:
            sent_headers = self._headers(url, headers) if bearer_allowed else dict(headers or {})
            request = self._http().build_request(
                method, url, content=content, json=json, headers=sent_headers
            )
            try:
                response = await self._http().send(request, stream=True)
            except httpx2.TransportError as exc:
                if attempt >= ATTEMPTS:
                    raise
                logger.info("connector HTTP %s failed (%s); retry in %g s", method,
                            type(exc).__name__, delay,
                            extra={"relay": self._name, "cause": type(exc).__name__,
                                   "next_attempt_s": delay})  # fmt: skip
            else:
                if response.is_redirect and method == "GET" and hops < MAX_REDIRECTS:
                    await response.aclose()
                    # Wherever it points, the token stays behind: a redirect is not the
                    # connector's media route, even if it looks like one.
                    url = urljoin(url, response.headers["location"])
                    bearer_allowed, hops = False, hops + 1
                    continue
                if response.status_code < 500 or attempt >= ATTEMPTS:
                    return response
                await response.aclose()
                logger.info("connector HTTP %s answered %d; retry in %g s", method,
                            response.status_code, delay,
                            extra={"relay": self._name,
                                   "cause": f"HTTP {response.status_code}",
                                   "next_attempt_s": delay})  # fmt: skip
            await trio.sleep(delay)
            delay *= 2
            attempt += 1


def _import_httpx2() -> ModuleType:
    try:
        import httpx2
    except ImportError:
        raise ImportError(
            "relay.media and open_relay(policy=...) call the connector over HTTP with "
            f"httpx2, which is not installed: {install_hint('httpx2')}"
        ) from None
    return httpx2
