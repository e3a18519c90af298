"""Proxy mounts from the environment, by the rules httpx documents for ``trust_env``.

A client given its own transport no longer looks the environment up itself, so the
keepalive clients do it here, from the stdlib's ``urllib.request.getproxies()`` (what
httpx reads too): a proxy URL per scheme, and "no proxy" for each ``NO_PROXY`` entry.
"""

from __future__ import annotations

import ipaddress
import urllib.request

__all__ = ["environment_proxies"]


def environment_proxies() -> dict[str, str | None]:
    """Mount pattern -> proxy URL (``None``: connect directly)."""
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
