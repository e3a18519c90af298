"""The outcome of one request (docs/protocol.md, "Outcomes").

Every request ends in exactly one [`Outcome`][trio_relay.Outcome]. ``ambiguous`` is true only when
our
frame left for the connector and we do not know what it did with it: the caller must not
blindly retry a non-idempotent action (a chat message would be posted twice). A definite
failure means the connector never saw the frame, so retrying is safe.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

# Failure codes the gateway itself produces; connector codes pass through unchanged.
CLOSING = "closing"
NOT_CONNECTED = "not_connected"
WRITE_FAILED = "write_failed"
CONNECTION_LOST = "connection_lost"
TIMEOUT = "timeout"
REVOKED = "revoked"
QUEUE_FULL = "queue_full"
UNSUPPORTED_OP = "unsupported_op"
DRAFT_SEALED = "draft_sealed"
# The connector's refusal of a repeated idempotency key with another action.
IDEMPOTENCY_CONFLICT = "idempotency_conflict"
# The connector's refusal, named by docs/protocol.md, "Egress declines"; also the code
# of a request the gateway answers itself because its chat is latched.
EGRESS_DECLINED = "egress_declined"
DECLINE_MARKER = "egress declined:"
"""What an older connector's decline says somewhere in its error (after the platform:
``"Slack egress declined: target is not an approved destination ..."``), in any case."""
_ACK = re.compile(r"\back(?:nowledge?ment)?s?\b")
_LOST = re.compile(r"\blost\b")
GATEWAY_CODES = frozenset(
    {
        CLOSING,
        NOT_CONNECTED,
        WRITE_FAILED,
        CONNECTION_LOST,
        TIMEOUT,
        REVOKED,
        QUEUE_FULL,
        UNSUPPORTED_OP,
        DRAFT_SEALED,
    }
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a request ended.

    ``success`` and ``result`` come from the connector when it answered; otherwise
    ``success`` is false, ``code`` names the situation (``"timeout"``,
    ``"connection_lost"``, ...) and ``error`` says it in words.

    ``attempts`` is how many times the request was written: 0 when nothing left, more
    than 1 when the relay sent it again under its idempotency key (docs/protocol.md,
    "Idempotency keys"); it takes no part in equality.
    """

    success: bool
    ambiguous: bool = False
    error: str | None = None
    code: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    attempts: int = field(default=1, compare=False)

    @property
    def replayed(self) -> bool:
        """True when the connector answered from its idempotency store (``result.replayed``):
        an earlier attempt under the same key was carried out, and this is its result."""
        return self.result.get("replayed") is True

    @property
    def egress_declined(self) -> bool:
        """True when the connector refused to deliver this to the chat: the chat is not
        an approved destination for this connection (code ``egress_declined``, or the
        text ``egress declined:`` anywhere in the error, in any case). A definite
        refusal, never retried as another op; the relay latches the chat after one
        (docs/protocol.md, "Egress declines"). Never true for an ambiguous outcome, nor
        for an error that speaks of a lost ack (the connector may have carried it
        out)."""
        if self.success or self.ambiguous:
            return False
        error = self.error
        if error is not None and mentions_lost_ack(error):
            return False
        if self.code == EGRESS_DECLINED:
            return True
        return error is not None and DECLINE_MARKER in error.lower()

    @classmethod
    def answered(cls, result: dict[str, Any]) -> Outcome:
        """The connector's answer, passed through. A refusal of egress is definite; one
        an older connector said only in words gets the code ``egress_declined`` (the
        ``result`` stays as it came), so every decline reads the same."""
        error = result.get("error")
        code = result.get("code")
        if code is None and isinstance(error, str) and declined_in_words(error):
            code = EGRESS_DECLINED
        # Made once per result on the reader's hot path: the fields are set through
        # their slots, past the frozen dataclass's __init__ (1.0 vs 1.7 us here; still
        # frozen for everyone else).
        outcome = _new(cls)
        _set_success(outcome, result.get("success") is True)
        _set_ambiguous(outcome, False)
        _set_error(outcome, error if isinstance(error, str) else None)
        _set_code(outcome, code if isinstance(code, str) else None)
        _set_result(outcome, result)
        _set_attempts(outcome, 1)
        return outcome

    @classmethod
    def definite(cls, code: str, error: str) -> Outcome:
        """A failure where the frame never reached the connector: safe to retry."""
        return cls(success=False, ambiguous=False, error=error, code=code, attempts=0)

    @classmethod
    def ambiguous_failure(cls, code: str, error: str) -> Outcome:
        """A failure after the frame was written: the connector may have applied it."""
        return cls(success=False, ambiguous=True, error=error, code=code)


def mentions_lost_ack(error: str) -> bool:
    """True when ``error`` speaks of a lost ack ("ack lost", "acknowledgement was
    lost"): such a result is never read as a decline."""
    lowered = error.lower()
    return _LOST.search(lowered) is not None and _ACK.search(lowered) is not None


def declined_in_words(error: str) -> bool:
    """True when ``error`` is a decline as an older connector words it (no code)."""
    return DECLINE_MARKER in error.lower() and not mentions_lost_ack(error)


_new = object.__new__
# The slots' own setters (what the frozen __init__ reaches through object.__setattr__).
_set_success = Outcome.__dict__["success"].__set__
_set_ambiguous = Outcome.__dict__["ambiguous"].__set__
_set_error = Outcome.__dict__["error"].__set__
_set_code = Outcome.__dict__["code"].__set__
_set_result = Outcome.__dict__["result"].__set__
_set_attempts = Outcome.__dict__["attempts"].__set__


def stats_label(outcome: Outcome) -> str:
    """The key ``outcome`` is counted under in ``RelayStats.requests``: ``"success"``,
    the gateway's own code (``"timeout"``, ``"connection_lost"``, ...), or ``"failed"``
    for the connector's refusal (whose codes are the connector's, not a fixed set)."""
    if outcome.success:
        return "success"
    if outcome.code in GATEWAY_CODES:
        return outcome.code
    return "failed"


def plain_success() -> Outcome:
    """``Outcome.answered({"success": True})``: the connector's usual answer, made
    without reading the result back (the decoder recognised it by its bytes). A fresh
    ``result`` each time: the caller owns it, and may change it."""
    outcome = _new(Outcome)
    _set_success(outcome, True)
    _set_ambiguous(outcome, False)
    _set_error(outcome, None)
    _set_code(outcome, None)
    _set_result(outcome, {"success": True})
    _set_attempts(outcome, 1)
    return outcome


def with_attempts(outcome: Outcome, attempts: int) -> Outcome:
    """``outcome`` as the end of a request written ``attempts`` times."""
    return outcome if outcome.attempts == attempts else replace(outcome, attempts=attempts)


def closing() -> Outcome:
    return Outcome.definite(CLOSING, "the relay is closing; nothing was sent")


def not_connected(state: str) -> Outcome:
    return Outcome.definite(
        NOT_CONNECTED,
        f"the relay is not connected (state {state}); nothing was sent. Retry later, or "
        "pass wait_connected=True to wait for the next connection",
    )


def write_failed(detail: str) -> Outcome:
    return Outcome.definite(
        WRITE_FAILED, f"the frame could not be written ({detail}); nothing was sent"
    )


def connection_lost(detail: str) -> Outcome:
    return Outcome.ambiguous_failure(
        CONNECTION_LOST,
        f"the connection was lost after the request was sent ({detail}); the connector "
        "may have applied it, so check before retrying",
    )


def timed_out(seconds: float, *, written: bool) -> Outcome:
    if written:
        return Outcome.ambiguous_failure(
            TIMEOUT,
            f"no result within {seconds:g} s after the request was sent; the connector "
            "may have applied it, so check before retrying",
        )
    return Outcome.definite(
        TIMEOUT, f"the request could not be sent within {seconds:g} s; nothing was sent"
    )


def revoked() -> Outcome:
    return Outcome.definite(
        REVOKED,
        "the relay is disabled: the connector revoked this gateway's credentials. "
        "Issue new credentials and open a new relay",
    )


def queue_full(limit: int) -> Outcome:
    return Outcome.definite(
        QUEUE_FULL,
        f"{limit} frames are already queued for sending; nothing was sent. Slow down or "
        "raise RelayConfig.max_queued_frames",
    )


def unsupported_op(op: str, platform: str) -> Outcome:
    return Outcome.definite(
        UNSUPPORTED_OP,
        f"platform {platform!r} does not advertise op {op!r} in its descriptor; nothing was sent",
    )


def draft_sealed(draft_id: object) -> Outcome:
    return Outcome.definite(
        DRAFT_SEALED,
        f"draft {draft_id!r} was already sealed (final: true); a draft after its seal "
        "would be ignored by the connector, so nothing was sent. Start a new reply",
    )
