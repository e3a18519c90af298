"""How an answer at the upgrade and a failed connect are taken (issue 11, issue 12)."""

from __future__ import annotations

import errno
import ssl

import pytest

from trio_relay._core.dial_failure import (
    bad_handshake,
    describe_error,
    refusal,
    retry_after_seconds,
)
from trio_relay._core.request_ids import RequestIds


@pytest.mark.parametrize("status", [401, 403])
def test_auth_statuses_read_as_a_4401(status: int) -> None:
    taken = refusal(status, "Unauthorized", None)
    assert taken.auth and taken.advice is None


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 599])
def test_transient_statuses_keep_retry_after_and_need_no_warning(status: int) -> None:
    taken = refusal(status, "Busy", 7.0)
    assert not taken.auth and taken.retry_after == 7.0 and taken.advice is None


@pytest.mark.parametrize(
    ("status", "words"),
    [(301, "redirect"), (307, "redirect"), (404, "path"), (400, "connector URL"), (418, "URL")],
)
def test_other_answers_carry_advice(status: int, words: str) -> None:
    taken = refusal(status, "Nope", None)
    assert not taken.auth and taken.advice is not None and words in taken.advice
    assert f"HTTP {status}" in taken.cause


def test_a_bad_handshake_carries_advice() -> None:
    assert bad_handshake("invalid Sec-WebSocket-Accept header").advice


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("soon", None),
        (None, None),
        ("-5", None),
    ],
)
def test_retry_after(value: str | None, seconds: float | None) -> None:
    now = 1445412480.0  # 2015-10-21 07:28:00 UTC
    assert retry_after_seconds(value, now=now) == seconds


def test_a_refused_connect_in_plain_words_not_a_group() -> None:
    group = ExceptionGroup(
        "all attempts failed",
        [
            ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
            OSError(errno.EHOSTUNREACH, "No route to host"),
        ],
    )
    top = OSError("all attempts to connect to example:443 failed")
    top.__cause__ = group
    text = describe_error(top)
    assert text == "connection refused (ECONNREFUSED); no route to host (EHOSTUNREACH)"


def test_a_tls_failure_behind_a_broken_stream_names_the_certificate_problem() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    verify.reason = "CERTIFICATE_VERIFY_FAILED"
    outer = RuntimeError("SSL handshake failed")
    outer.__cause__ = verify
    assert describe_error(outer) == (
        "certificate verify failed: unable to get local issuer certificate "
        "(CERTIFICATE_VERIFY_FAILED)"
    )


def test_request_ids_are_unique_and_do_not_follow_from_each_other() -> None:
    ids = RequestIds()
    seen = [ids.next() for _ in range(5000)]
    assert len(set(seen)) == len(seen)
    assert all(len(i) == 16 for i in seen)
    # Not a counter under a fixed prefix: consecutive ids share no common prefix.
    assert len({i[:8] for i in seen}) > 4900


def test_request_ids_come_from_the_random_source() -> None:
    ids = RequestIds(lambda n: bytes(range(256)) * (n // 256))
    assert ids.next() == "0001020304050607"
    assert ids.next() == "08090a0b0c0d0e0f"
    assert "key" not in repr(ids) and "pool" not in repr(ids)


def test_a_tls_eof_reads_as_a_handshake_failure_only_before_the_handshake_is_done() -> None:
    eof = ssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    eof.reason = "UNEXPECTED_EOF_WHILE_READING"
    outer = RuntimeError("broken stream")
    outer.__cause__ = eof
    assert describe_error(outer) == "TLS handshake failed: UNEXPECTED_EOF_WHILE_READING"
    assert describe_error(outer, handshake_done=True) == (
        "the peer closed the TLS connection without a close_notify"
    )
    other = ssl.SSLError(1, "bad record mac")
    other.reason = "DECRYPTION_FAILED_OR_BAD_RECORD_MAC"
    assert describe_error(other, handshake_done=True) == (
        "TLS error on the established link: DECRYPTION_FAILED_OR_BAD_RECORD_MAC"
    )
