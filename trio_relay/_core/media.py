"""The connector's HTTP routes as seen from the gateway (docs/protocol.md, "HTTP
routes"): where they live, which URLs may carry the bearer token, what an upload answer
means, and the media errors.

The bearer token is the gateway's credential, so it goes only where the contract says:
to the connector's own origin (scheme, host and port of the relay URL) and, for media,
only under its ``/relay/media/`` path. Media at any other URL (platform-public links,
a redirect's target) is fetched without it. Sans-I/O: string handling only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .errors import RelayError
from .url import normalize_url

__all__ = [
    "DEFAULT_MAX_MEDIA_BYTES",
    "ConnectorRoutes",
    "MediaError",
    "MediaTooLarge",
    "parse_upload_answer",
]

DEFAULT_MAX_MEDIA_BYTES = 25 * 1024 * 1024
"""The connector refuses larger uploads with 413; downloads are capped alike."""

_HTTP_SCHEMES = {"ws": "http", "wss": "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


class MediaError(RelayError):
    """A media upload or download failed; the message says why and what to do."""


class MediaTooLarge(MediaError):
    """The media is over the size cap (ours, or the connector's 413)."""


def _origin(url: str) -> tuple[str, str, int] | None:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, parts.hostname.lower(), port


@dataclass(frozen=True, slots=True)  # no __dict__: one per relay
class ConnectorRoutes:
    """The HTTP routes of the connector a relay URL points at."""

    base: str
    """``scheme://host[:port][/prefix]`` with no user info, query or trailing ``/``."""

    @classmethod
    def from_relay_url(cls, url: str) -> ConnectorRoutes:
        parts = urlsplit(normalize_url(url))
        netloc = parts.netloc.rpartition("@")[2]  # never user info: it may be a secret
        prefix = parts.path.removesuffix("/relay")
        return cls(f"{_HTTP_SCHEMES[parts.scheme]}://{netloc}{prefix}")

    @property
    def media(self) -> str:
        return f"{self.base}/relay/media"

    @property
    def policy(self) -> str:
        return f"{self.base}/relay/policy"

    def media_url(self, media_id: str) -> str:
        """The ``source_url`` of uploaded media, for a ``send_media`` action."""
        return f"{self.media}/{media_id}"

    def is_own_media(self, url: str) -> bool:
        """``url`` is media on the connector's own origin, under ``/relay/media/``: the
        only downloads that carry the bearer token, and what ``download_media`` fetches
        on receipt (re-hosted media expire)."""
        own = _origin(self.base)
        if own is None or _origin(url) != own:
            return False
        path = urlsplit(url).path
        return path.startswith(urlsplit(self.media).path + "/") and ".." not in path.split("/")


def parse_upload_answer(answer: Any, routes: ConnectorRoutes) -> str:
    """The ``source_url`` from a ``POST /relay/media`` answer ``{id, size}``."""
    media_id = answer.get("id") if isinstance(answer, dict) else None
    if not isinstance(media_id, str) or not media_id or "/" in media_id:
        raise MediaError(
            "the connector's answer to a media upload has no usable id (expected "
            '{"id": ..., "size": ...}); check that the connector implements POST /relay/media'
        )
    return routes.media_url(media_id)
