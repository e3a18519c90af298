"""classify(): every rule of docs/protocol.md, "Close codes", as a table row."""

from __future__ import annotations

import itertools

import pytest

from trio_relay._core.close import (
    AUTH_CLOSE_CODE,
    EXPIRED_REASON,
    NORMAL_CLOSE_CODE,
    ConnectionEnd,
    Verdict,
    classify,
)

R, F, X, C = (
    Verdict.RECONNECT,
    Verdict.FRESH_TOKEN_REDIAL,
    Verdict.REVOKED,
    Verdict.CLOSED,
)

# (code, reason, had_handshake, fresh_token_redial, by_us) -> verdict
TABLE: list[tuple[int | None, str | None, bool, bool, bool, Verdict]] = [
    # 4401 before any descriptor: a provisioning race, retry with backoff.
    (4401, "unauthorized", False, False, False, R),
    (4401, None, False, False, False, R),
    (4401, "", False, False, False, R),
    # 4401 "expired": never a revocation, whatever else is true.
    (4401, "expired", False, False, False, R),
    (4401, "expired", True, False, False, R),
    (4401, "expired", False, True, False, R),
    (4401, "expired", True, True, False, R),
    # 4401 with another reason after a handshake: one redial at once with a fresh token.
    (4401, "unauthorized", True, False, False, F),
    (4401, "revoked", True, False, False, F),
    (4401, None, True, False, False, F),
    (4401, "", True, False, False, F),
    # Second strike on the fresh-token connection: refused at upgrade (no handshake)...
    (4401, "unauthorized", False, True, False, X),
    (4401, None, False, True, False, X),
    # ...or closed with 4401 again after its handshake.
    (4401, "unauthorized", True, True, False, X),
    (4401, None, True, True, False, X),
    # Ordinary drops: reconnect with backoff, even on the fresh-token connection.
    (1011, "keepalive ping timeout", True, False, False, R),
    (1011, None, False, True, False, R),
    (1000, None, True, False, False, R),
    (1000, "bye", True, True, False, R),
    (1006, None, True, False, False, R),
    (1006, None, False, True, False, R),
    (None, None, True, False, False, R),  # reset or silent stall
    (None, None, False, True, False, R),
    (None, "expired", True, False, False, R),
    # Other 44xx codes are not the auth code.
    (4400, "unauthorized", True, True, False, R),
    (4403, "forbidden", True, False, False, R),
    # We closed it on purpose: nothing to redial, whatever the code says.
    (1000, None, True, False, True, C),
    (None, None, False, False, True, C),
    (4401, "unauthorized", True, True, True, C),
    (4401, "unauthorized", True, False, True, C),
]


@pytest.mark.parametrize(("code", "reason", "handshake", "fresh", "by_us", "verdict"), TABLE)
def test_classify(
    code: int | None,
    reason: str | None,
    handshake: bool,
    fresh: bool,
    by_us: bool,
    verdict: Verdict,
) -> None:
    end = ConnectionEnd("test", code, reason, had_handshake=handshake, by_us=by_us)
    assert classify(end, fresh_token_redial=fresh) is verdict


@pytest.mark.parametrize(
    ("code", "handshake", "fresh"),
    list(itertools.product([1000, 1001, 1006, 1011, 1012, None], [False, True], [False, True])),
)
def test_every_non_auth_end_reconnects(code: int | None, handshake: bool, fresh: bool) -> None:
    end = ConnectionEnd("test", code, "unauthorized", had_handshake=handshake)
    assert classify(end, fresh_token_redial=fresh) is Verdict.RECONNECT


@pytest.mark.parametrize(
    ("handshake", "fresh", "code"),
    list(itertools.product([False, True], [False, True], [4401, 1000, 1006, 1011, None])),
)
def test_by_us_always_closed(handshake: bool, fresh: bool, code: int | None) -> None:
    end = ConnectionEnd("test", code, None, had_handshake=handshake, by_us=True)
    assert classify(end, fresh_token_redial=fresh) is Verdict.CLOSED


def test_revocation_sequence() -> None:
    """The supervisor's view: strike one, a fresh-token redial, strike two."""
    end = ConnectionEnd("test", AUTH_CLOSE_CODE, "unauthorized", had_handshake=True)
    assert classify(end) is Verdict.FRESH_TOKEN_REDIAL
    assert classify(end, fresh_token_redial=True) is Verdict.REVOKED


def test_fresh_token_connection_that_expires_is_not_revoked() -> None:
    end = ConnectionEnd("test", AUTH_CLOSE_CODE, EXPIRED_REASON, had_handshake=True)
    assert classify(end, fresh_token_redial=True) is Verdict.RECONNECT


def test_constants() -> None:
    assert AUTH_CLOSE_CODE == 4401
    assert EXPIRED_REASON == "expired"
    assert NORMAL_CLOSE_CODE == 1000
    assert {v.name for v in Verdict} == {"RECONNECT", "FRESH_TOKEN_REDIAL", "REVOKED", "CLOSED"}


def test_connection_end_defaults() -> None:
    end = ConnectionEnd("closed by peer", 1006)
    assert end.by_us is False
    assert end.had_handshake is False
    assert end.up_for is None


@pytest.mark.parametrize(
    ("status", "patience"),
    [
        (None, False),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (407, False),
        (408, True),
        (429, True),
        (499, False),
        (500, True),
        (502, True),
        (503, True),
        (599, True),
        (600, False),
    ],
)
def test_which_http_answers_ask_for_patience(status: int | None, patience: bool) -> None:
    """408, 429 and 5xx at the upgrade: retried with backoff, honouring Retry-After."""
    assert ConnectionEnd("test", http_status=status).asks_for_patience is patience


@pytest.mark.parametrize(
    ("code", "refused"), [(AUTH_CLOSE_CODE, True), (4400, False), (1000, False), (None, False)]
)
def test_auth_refused_is_the_auth_close_code(code: int | None, refused: bool) -> None:
    assert ConnectionEnd("test", code).auth_refused is refused
