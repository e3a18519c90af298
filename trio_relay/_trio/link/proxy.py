"""An HTTP CONNECT tunnel for the relay's WebSocket.

Which proxy: ``RelayConfig(proxy=True)`` (the default) reads the environment the way
curl and httpx do — ``HTTPS_PROXY`` for ``wss``, ``HTTP_PROXY`` for ``ws``, then
``ALL_PROXY``, any case — and honours ``NO_PROXY`` (``*``, host names and their
subdomains, ``.suffix``, ``host:port``, IP addresses and CIDR blocks). A URL sets the
proxy; ``False`` dials directly. Only ``http://`` proxies are spoken (CONNECT); TLS to
the connector runs inside the tunnel, so the proxy never sees the bearer token of a
``wss`` relay.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import trio

from ..._core.endpoint import Endpoint

MAX_ANSWER_BYTES = 16 * 1024


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    credentials: str | None = field(default=None, repr=False)
    """``user:password`` for ``Proxy-Authorization: Basic``; never logged."""

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class ProxyRefused(OSError):
    """The proxy did not open the tunnel (its status line says why); ``status`` is its
    HTTP status when it answered with one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _env(name: str) -> str | None:
    return os.environ.get(name.lower()) or os.environ.get(name.upper()) or None


def parse_proxy(url: str) -> Proxy:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", ""):
        raise ProxyRefused(
            f"unsupported proxy scheme {parts.scheme!r}: only http:// (CONNECT) proxies "
            "are supported; set RelayConfig(proxy=False) to dial directly"
        )
    if not parts.hostname:
        raise ProxyRefused(f"proxy URL has no host: {parts.scheme}://…")
    credentials = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return Proxy(parts.hostname, parts.port or 80, credentials)


def bypassed(host: str, port: int, no_proxy: str | None) -> bool:
    """Whether ``NO_PROXY`` exempts ``host:port``."""
    if not no_proxy:
        return False
    host = host.lower().strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (item.strip().lower() for item in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        entry_host, entry_port = entry, None
        if entry.count(":") == 1 and not entry.startswith("["):
            entry_host, _, port_text = entry.partition(":")
            entry_port = int(port_text) if port_text.isdigit() else None
        entry_host = entry_host.strip("[]")
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry_host, strict=False):
                    return True
            except ValueError:
                pass
            continue
        suffix = entry_host.lstrip(".")
        if host == suffix or host.endswith("." + suffix):
            return True
    return False


def proxy_for(endpoint: Endpoint, setting: str | bool) -> Proxy | None:
    """The proxy to tunnel through for ``endpoint``, or None to dial directly."""
    if setting is False:
        return None
    if isinstance(setting, str):
        return parse_proxy(setting)
    url = _env("https_proxy" if endpoint.secure else "http_proxy") or _env("all_proxy")
    if url is None or bypassed(endpoint.host, endpoint.port, _env("no_proxy")):
        return None
    return parse_proxy(url)


async def open_tunnel(stream: trio.abc.Stream, endpoint: Endpoint, proxy: Proxy) -> None:
    """Ask the proxy on ``stream`` to CONNECT to ``endpoint``; returns once it has.

    Raises :class:`ProxyRefused` for any answer but ``2xx``."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    target = f"{host}:{endpoint.port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if proxy.credentials is not None:
        token = base64.b64encode(proxy.credentials.encode()).decode()
        lines.append(f"Proxy-Authorization: Basic {token}")
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = await stream.receive_some(MAX_ANSWER_BYTES)
        if not data:
            raise ProxyRefused(f"proxy {proxy} closed the connection before answering CONNECT")
        answer += data
        if len(answer) > MAX_ANSWER_BYTES:
            raise ProxyRefused(f"proxy {proxy} sent an oversized answer to CONNECT")
    head, _, rest = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1", errors="replace")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProxyRefused(f"proxy {proxy} answered CONNECT with garbage: {status_line[:80]!r}")
    if not 200 <= int(parts[1]) <= 299:
        raise ProxyRefused(
            f"proxy {proxy} refused CONNECT to {target}: {status_line[:120]}", int(parts[1])
        )
    if rest:
        raise ProxyRefused(f"proxy {proxy} sent bytes before the tunnel was used")
