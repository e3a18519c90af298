"""What to do after a connection ends (docs/protocol.md, "Close codes").

Sans-I/O: the decision is a pure function of how the connection ended, so every rule
of the contract is a table row in the tests.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

AUTH_CLOSE_CODE = 4401
EXPIRED_REASON = "expired"
NORMAL_CLOSE_CODE = 1000


class Verdict(enum.Enum):
    RECONNECT = "reconnect"
    """An ordinary drop: dial again after the backoff delay."""
    FRESH_TOKEN_REDIAL = "fresh_token_redial"
    """A 4401 on an established connection: dial once more at once, with a new token."""
    REVOKED = "revoked"
    """Terminal: the connector refused a fresh token. Stop dialling."""
    CLOSED = "closed"
    """We closed it on purpose (the relay is shutting down)."""


@dataclass(frozen=True, slots=True)
class ConnectionEnd:
    """How one connection (or one dial) ended: the only record of it.

    ``cause`` is a short account for logs and stats. ``code`` and ``reason`` are the
    WebSocket close frame's (``None`` for a reset, a stall, or a dial that never got as
    far as a WebSocket). ``by_us`` is true when the relay itself ended it on purpose.
    ``had_handshake`` is true once at least one descriptor arrived; ``up_for`` is how
    long it served after its handshake (``None``: it never did).

    A dial refused at the HTTP upgrade carries its ``http_status`` and, when the server
    sent one, ``retry_after`` (seconds). ``advice`` is set for a failure a person should
    look at (it is logged at WARNING): what to check, in plain words.
    """

    cause: str
    code: int | None = None
    reason: str | None = None
    by_us: bool = False
    had_handshake: bool = False
    up_for: float | None = None
    http_status: int | None = None
    retry_after: float | None = None
    advice: str | None = None
    errno: int | None = None
    """The OS error number of a dial that failed on one (``ECONNREFUSED``, ...)."""

    @property
    def auth_refused(self) -> bool:
        """The connector refused our credentials (a 4401, or HTTP 401/403 at upgrade)."""
        return self.code == AUTH_CLOSE_CODE

    @property
    def asks_for_patience(self) -> bool:
        """An HTTP answer that means "not now": 408, 429 or any 5xx at the upgrade."""
        status = self.http_status
        return status is not None and (status in (408, 429) or 500 <= status <= 599)


def classify(end: ConnectionEnd, *, fresh_token_redial: bool = False) -> Verdict:
    """``fresh_token_redial`` marks the connection dialled right after a first 4401
    strike: the supervisor's knowledge, not the connection's."""
    if end.by_us:
        return Verdict.CLOSED
    if end.code != AUTH_CLOSE_CODE:
        return Verdict.RECONNECT  # 1000, 1006, 1011, resets and stalls alike
    if end.reason == EXPIRED_REASON:
        return Verdict.RECONNECT  # a token that aged out is never a revocation
    if fresh_token_redial:
        # Second strike: the fresh token was refused at upgrade, or the re-dialled
        # connection was closed with 4401 again.
        return Verdict.REVOKED
    if not end.had_handshake:
        return Verdict.RECONNECT  # provisioning race: the connector may not know us yet
    return Verdict.FRESH_TOKEN_REDIAL
