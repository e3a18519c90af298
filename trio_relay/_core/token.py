"""Upgrade tokens: ``base64url("{gateway_id}:{exp}:{sig}")`` without padding.

``sig`` is the lowercase hex HMAC-SHA256 of ``"{gateway_id}:{exp}"`` keyed by the shared
secret; ``exp`` is unix seconds (0 means the token never expires). The gateway mints one
per dial; the reference connector verifies them. Sans-I/O: the clock is a parameter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_TOKEN_TTL = 300.0


def _signature(gateway_id: str, exp: int, secret: str) -> str:
    message = f"{gateway_id}:{exp}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def check_gateway_id(gateway_id: str) -> None:
    """The one rule for a gateway id, wherever one is given: non-empty, and no ``':'``
    (the token is colon-delimited; a colon in the id would make it ambiguous)."""
    if not gateway_id or ":" in gateway_id:
        raise ValueError(f"a gateway id must be non-empty and contain no ':', got {gateway_id!r}")


def mint_token(gateway_id: str, secret: str, *, ttl: float, now: float) -> str:
    """Mint a bearer token valid until ``now + ttl`` (``ttl == 0``: never expires)."""
    check_gateway_id(gateway_id)
    if ttl < 0:
        raise ValueError(f"token TTL must be >= 0 seconds (0 = never expires), got {ttl}")
    exp = 0 if ttl == 0 else int(now + ttl)
    raw = f"{gateway_id}:{exp}:{_signature(gateway_id, exp, secret)}"
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class TokenCheck:
    """The verdict on a presented token. ``reason`` is ``"expired"`` for a token that
    merely aged out, so the connector can tell the gateway it was not a revocation."""

    ok: bool
    gateway_id: str | None
    reason: str


def verify_token(
    token: str,
    secrets: dict[str, str],
    *,
    now: float,
    compare: Callable[[bytes, bytes], bool] = hmac.compare_digest,
) -> TokenCheck:
    """Check ``token`` against ``secrets`` (gateway id → secret) at time ``now``.

    ``compare`` is the constant-time comparison of the signatures (a parameter so that a
    test can watch it work; leave it alone)."""
    try:
        padded = token + "=" * (-len(token) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeError):
        return TokenCheck(False, None, "malformed")
    gateway_id, sep1, rest = raw.partition(":")
    exp_text, sep2, sig = rest.partition(":")
    # isascii: str.isdigit() also accepts digits such as '²' that int() refuses.
    if not (sep1 and sep2) or not (exp_text.isascii() and exp_text.isdigit()):
        return TokenCheck(False, None, "malformed")
    secret = secrets.get(gateway_id)
    if secret is None:
        return TokenCheck(False, gateway_id, "unknown gateway")
    exp = int(exp_text)
    if not compare(sig.encode(), _signature(gateway_id, exp, secret).encode()):
        return TokenCheck(False, gateway_id, "bad signature")
    if exp != 0 and exp < now:
        return TokenCheck(False, gateway_id, "expired")
    return TokenCheck(True, gateway_id, "ok")
