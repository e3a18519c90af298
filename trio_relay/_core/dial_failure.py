"""Why a dial failed, in words a user can act on, and what the answer means.

Two pure helpers for the shell's dialer and upgrade:

- `refusal` reads an HTTP answer other than ``101`` at the upgrade (or a ``101``
  that fails the WebSocket checks) and says how the relay should take it: ``401``/``403``
  read as a ``4401`` before any descriptor (docs/protocol.md, "Close codes"),
  ``408``/``429``/``5xx`` are transient (honour ``Retry-After``), anything else is retried
  too but deserves a WARNING naming the status and what to check. Redirects are never
  followed: the bearer token must not travel to another origin.
- `describe_error` turns the exception of a failed connect or TLS handshake into
  one line ("connection refused (errno 111)", "certificate verify failed: …") instead of
  a nested ``OSError: all attempts … ExceptionGroup``.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import errno
import os
import ssl
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

AUTH_STATUSES = frozenset({401, 403})
TRANSIENT_STATUSES = frozenset({408, 429})


@dataclass(frozen=True, slots=True)
class Refusal:
    """How to take a refused upgrade."""

    cause: str
    """For logs and ``ConnectionEnd.cause``."""
    auth: bool = False
    """The connector refused our credentials: counts as a 4401 before any descriptor."""
    retry_after: float | None = None
    """Seconds the server asked us to wait (``Retry-After``), if it said."""
    advice: str | None = None
    """Set when the answer points at a misconfiguration: what to check (log at WARNING)."""


def retry_after_seconds(value: str | None, *, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP date; None if
    absent or unreadable (never negative)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def refusal(status: int, reason: str, retry_after: float | None) -> Refusal:
    """What an HTTP ``status`` at the upgrade means (``reason``: its reason phrase)."""
    said = f"HTTP {status} {reason}".rstrip()
    if status in AUTH_STATUSES:
        return Refusal(f"upgrade refused: {said} (credentials refused)", auth=True)
    if status in TRANSIENT_STATUSES or 500 <= status <= 599:
        return Refusal(f"upgrade refused: {said}", retry_after=retry_after)
    if 300 <= status <= 399:
        return Refusal(
            f"upgrade refused: {said} (redirect not followed)",
            retry_after=retry_after,
            advice=(
                "the connector URL redirects elsewhere; configure the final URL "
                "(redirects are not followed, so the bearer token stays with this origin)"
            ),
        )
    if status == 404:
        advice = "check the connector URL's path (the relay dials <base>/relay)"
    elif status == 101:
        advice = "the server switched protocols but is not a WebSocket connector"
    else:
        advice = "check the connector URL and that it points at a relay connector"
    return Refusal(f"upgrade refused: {said}", retry_after=retry_after, advice=advice)


PROXY_AUTH_STATUSES = frozenset({401, 407})
"""A forward proxy's answers to CONNECT that mean our proxy credentials are missing or
wrong: a person must fix them, so they warn at once, like the other misconfigurations."""

PROXY_AUTH_ADVICE = (
    "the proxy refused our credentials: check the proxy credentials "
    "(user:password in RelayConfig.proxy or the HTTPS_PROXY/HTTP_PROXY/ALL_PROXY URL)"
)


def proxy_refusal(status: int | None, cause: str) -> Refusal:
    """How to take a proxy's refusal of CONNECT with ``status`` (None: no readable one)."""
    advice = PROXY_AUTH_ADVICE if status in PROXY_AUTH_STATUSES else None
    return Refusal(cause, advice=advice)


def bad_handshake(detail: str) -> Refusal:
    """A ``101`` that fails the WebSocket checks (wrong ``Sec-WebSocket-Accept``, …)."""
    return Refusal(
        f"upgrade failed: {detail}",
        advice="the server at this URL is not speaking WebSocket correctly; check the "
        "URL and any proxy or load balancer in front of the connector",
    )


_PLAIN_ERRNO = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset by peer",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "connection timed out",
    errno.ECONNABORTED: "connection aborted",
    errno.EPIPE: "connection closed by peer (broken pipe)",
    errno.EADDRNOTAVAIL: "address not available",
}


def describe_error(exc: BaseException, *, handshake_done: bool = False) -> str:
    """One line for the exception of a failed dial: what happened, errno where known.

    ``handshake_done``: the TLS handshake had completed (the link was established), so
    a TLS error is no handshake failure; an EOF without ``close_notify`` (what nginx's
    old worker does at a reload) then reads as the peer closing the TLS connection."""
    leaves = list(_leaves(exc))
    texts: list[str] = []
    for leaf in leaves:
        text = _describe_one(leaf, handshake_done)
        if text not in texts:
            texts.append(text)
    if not texts:
        return type(exc).__name__
    if len(texts) == 1:
        return texts[0]
    return "; ".join(texts[:3]) + ("; …" if len(texts) > 3 else "")


def _leaves(exc: BaseException) -> list[BaseException]:
    # Happy eyeballs raises one OSError per address tried, grouped; trio's TLS errors
    # arrive as BrokenResourceError caused by the ssl error. The leaves say why.
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out += _leaves(inner)
        return out
    seen = 0
    while exc.__cause__ is not None and seen < 4:
        if isinstance(exc, (ssl.SSLError, OSError)) and exc.errno is not None:
            break
        exc = exc.__cause__
        seen += 1
    if isinstance(exc, BaseExceptionGroup):
        return _leaves(exc)
    return [exc]


def _describe_one(exc: BaseException, handshake_done: bool) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or str(exc)
        return f"certificate verify failed: {detail} ({exc.reason or 'SSL'})"
    if isinstance(exc, ssl.SSLError) and handshake_done:
        if isinstance(exc, ssl.SSLEOFError) or exc.reason == "UNEXPECTED_EOF_WHILE_READING":
            return "the peer closed the TLS connection without a close_notify"
        return f"TLS error on the established link: {exc.reason or exc}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.errno is not None:
        words = _PLAIN_ERRNO.get(exc.errno) or os.strerror(exc.errno).lower()
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{words} ({name})"
    if isinstance(exc, OSError) and str(exc):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
