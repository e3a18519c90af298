"""A proxy tunnel for the relay's WebSocket: HTTP CONNECT or SOCKS5.

Which proxy: ``RelayConfig(proxy=True)`` (the default) reads the environment the way
curl and httpx do — ``HTTPS_PROXY`` for ``wss``, ``HTTP_PROXY`` for ``ws``, then
``ALL_PROXY``, any case — and honours ``NO_PROXY`` (``*``, host names and their
subdomains, ``.suffix``, ``host:port``, IP addresses and CIDR blocks). A URL sets the
proxy; ``False`` dials directly. ``http://`` proxies are spoken with CONNECT;
``socks5://`` (the connector's name resolved here) and ``socks5h://`` (resolved by the
proxy) with RFC 1928, a ``user:password`` by RFC 1929. TLS to the connector runs
inside the tunnel, so the proxy never sees the bearer token of a ``wss`` relay; the
proxy's password is never in a log line, an error or a repr.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import socket
import struct
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import trio

from ..._core.endpoint import Endpoint

MAX_ANSWER_BYTES = 16 * 1024


SCHEMES = {"http": 80, "socks5": 1080, "socks5h": 1080}
"""The proxy schemes spoken, and their default ports."""


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    credentials: str | None = field(default=None, repr=False)
    """``user:password`` for ``Proxy-Authorization: Basic`` or SOCKS5's RFC 1929;
    never logged."""
    scheme: str = "http"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


class ProxyRefused(OSError):
    """The proxy did not open the tunnel (its answer says why); ``status`` is its HTTP
    status when it answered with one. A SOCKS5 proxy's refusal of our username and
    password reads as 407, HTTP's word for the same (it needs a person just as much)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _env(name: str) -> str | None:
    return os.environ.get(name.lower()) or os.environ.get(name.upper()) or None


def parse_proxy(url: str) -> Proxy:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = parts.scheme.lower() or "http"
    if scheme not in SCHEMES:
        raise ProxyRefused(
            f"unsupported proxy scheme {parts.scheme!r}: http:// (CONNECT), socks5:// and "
            "socks5h:// proxies are supported; set RelayConfig(proxy=False) to dial directly"
        )
    if not parts.hostname:
        raise ProxyRefused(f"proxy URL has no host: {scheme}://…")
    credentials = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return Proxy(parts.hostname, parts.port or SCHEMES[scheme], credentials, scheme)


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
    """Ask the proxy on ``stream`` to connect to ``endpoint``; returns once it has.

    Raises `ProxyRefused` for any answer but a success (``2xx`` for CONNECT)."""
    if proxy.scheme != "http":
        await _socks5_connect(stream, endpoint, proxy)
        return
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


# --- SOCKS5 (RFC 1928, username/password by RFC 1929) -------------------------------

SOCKS_REPLIES = {
    1: "general SOCKS server failure",
    2: "connection not allowed by ruleset",
    3: "network unreachable",
    4: "host unreachable",
    5: "connection refused",
    6: "TTL expired",
    7: "command not supported",
    8: "address type not supported",
}
"""RFC 1928 §6: what a CONNECT reply's REP field means."""


async def _read_exactly(stream: trio.abc.Stream, count: int, proxy: Proxy) -> bytes:
    data = b""
    while len(data) < count:
        chunk = await stream.receive_some(count - len(data))
        if not chunk:
            raise ProxyRefused(f"SOCKS5 proxy {proxy} closed the connection mid-answer")
        data += chunk
    return data


async def _socks5_connect(stream: trio.abc.Stream, endpoint: Endpoint, proxy: Proxy) -> None:
    methods = b"\x00\x02" if proxy.credentials is not None else b"\x00"
    await stream.send_all(b"\x05" + bytes([len(methods)]) + methods)
    version, method = await _read_exactly(stream, 2, proxy)
    if version != 5:
        raise ProxyRefused(f"proxy {proxy} is not a SOCKS5 proxy (it answered version {version})")
    if method == 0xFF:
        if proxy.credentials is None:
            raise ProxyRefused(
                f"SOCKS5 proxy {proxy} requires a username and password", status=407
            )
        raise ProxyRefused(f"SOCKS5 proxy {proxy} accepts none of our authentication methods")
    if method == 2:
        if proxy.credentials is None:  # it chose a method we did not offer
            raise ProxyRefused(f"SOCKS5 proxy {proxy} asked for a password we did not offer")
        user, _, password = proxy.credentials.partition(":")
        name, secret = user.encode(), password.encode()
        if len(name) > 255 or len(secret) > 255:
            raise ProxyRefused(
                f"SOCKS5 proxy {proxy}: the username and password must be at most 255 bytes each"
            )
        await stream.send_all(
            b"\x01" + bytes([len(name)]) + name + bytes([len(secret)]) + secret
        )
        _, status = await _read_exactly(stream, 2, proxy)
        if status != 0:
            raise ProxyRefused(
                f"SOCKS5 proxy {proxy} refused the username and password (status {status})",
                status=407,
            )
    elif method != 0:
        raise ProxyRefused(f"SOCKS5 proxy {proxy} chose an unknown method {method}")
    await stream.send_all(b"\x05\x01\x00" + await _address(endpoint, proxy))
    head = await _read_exactly(stream, 4, proxy)
    if head[0] != 5:
        raise ProxyRefused(f"SOCKS5 proxy {proxy} answered CONNECT with garbage")
    if head[1] != 0:
        why = SOCKS_REPLIES.get(head[1], f"reply {head[1]}")
        target = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        raise ProxyRefused(
            f"SOCKS5 proxy {proxy} refused CONNECT to {target}:{endpoint.port}: {why}"
        )
    # The bound address the proxy reports; read past it, unused.
    kind = head[3]
    if kind == 1:
        await _read_exactly(stream, 4 + 2, proxy)
    elif kind == 4:
        await _read_exactly(stream, 16 + 2, proxy)
    elif kind == 3:
        (length,) = await _read_exactly(stream, 1, proxy)
        await _read_exactly(stream, length + 2, proxy)
    else:
        raise ProxyRefused(f"SOCKS5 proxy {proxy} answered with address type {kind}")


async def _address(endpoint: Endpoint, proxy: Proxy) -> bytes:
    """DST.ADDR and DST.PORT of the CONNECT request: the name itself for ``socks5h``,
    the address it resolves to here for ``socks5`` (an IP address is sent as one)."""
    host = endpoint.host.strip("[]")
    port = struct.pack("!H", endpoint.port)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None and proxy.scheme == "socks5h":
        name = host.encode("idna")
        if len(name) > 255:
            raise ProxyRefused(f"host name too long for SOCKS5: {host[:40]}…")
        return b"\x03" + bytes([len(name)]) + name + port
    if address is None:
        try:
            infos = await trio.socket.getaddrinfo(host, endpoint.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ProxyRefused(
                f"cannot resolve {host} for SOCKS5 proxy {proxy} ({exc.strerror}); use "
                "socks5h:// to have the proxy resolve it"
            ) from None
        address = ipaddress.ip_address(infos[0][4][0])
    if address.version == 4:
        return b"\x01" + address.packed + port
    return b"\x04" + address.packed + port
