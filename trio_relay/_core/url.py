"""Normalise the configured connector base URL into the WebSocket URL we dial.

Sans-I/O: plain string handling, no Trio, no sockets.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

_SCHEMES = {"https": "wss", "http": "ws", "wss": "wss", "ws": "ws"}
_SUFFIX = "/relay"


def normalize_url(base_url: str) -> str:
    """Return the relay WebSocket URL for ``base_url`` (docs/protocol.md, "Transport").

    ``https`` becomes ``wss`` and ``http`` becomes ``ws``; trailing slashes are
    stripped and ``/relay`` is appended unless the path already ends with it. Applying
    it twice gives the same answer as applying it once.

    Raises ``ValueError`` for a URL with no host or a scheme that is not one of
    http, https, ws or wss, naming what was wrong (the URL itself is not repeated, since
    users sometimes paste credentials into it).
    """
    parts = urlsplit(base_url.strip())
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ValueError(
            f"relay URL scheme {parts.scheme!r} is not supported; "
            "use http://, https://, ws:// or wss://"
        )
    if not parts.hostname:
        raise ValueError("relay URL has no host; expected e.g. https://connector.example")
    try:
        parts.port  # noqa: B018  # parsing it raises for a non-numeric or out-of-range port
    except ValueError:
        raise ValueError("relay URL has an invalid port; expected a number 1-65535") from None
    path = parts.path.rstrip("/")
    if not path.endswith(_SUFFIX):
        path += _SUFFIX
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def masked_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for reprs and logs.

    Works on what ``urlsplit`` cannot parse too (a bad port, no scheme): everything
    between the scheme (if any) and the last ``@`` before the path is userinfo."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority_end = len(rest)
    for stop in "/?#":
        index = rest.find(stop)
        if index != -1:
            authority_end = min(authority_end, index)
    authority, tail = rest[:authority_end], rest[authority_end:]
    if "@" not in authority:
        return url
    host = authority.rpartition("@")[2]
    return f"{scheme}{sep}***@{host}{tail}"
