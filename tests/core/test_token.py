"""Upgrade tokens (docs/protocol.md, "Upgrade authentication"), checked against an
independent decoding and HMAC computation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.token import DEFAULT_TOKEN_TTL, TokenCheck, mint_token, verify_token

NOW = 1_700_000_000.0
URLSAFE = set(string.ascii_letters + string.digits + "-_")


def _decode(token: str) -> tuple[str, str, str]:
    """Undo the token format by hand (not with trio_relay's code)."""
    assert "=" not in token
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8")
    gateway_id, exp, sig = raw.split(":")
    return gateway_id, exp, sig


def _expected_sig(gateway_id: str, exp: int, secret: str) -> str:
    return hmac.new(secret.encode(), f"{gateway_id}:{exp}".encode(), hashlib.sha256).hexdigest()


def _forge(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()


def test_default_ttl_is_contract_value() -> None:
    assert DEFAULT_TOKEN_TTL == 300


def test_exact_format() -> None:
    token = mint_token("gw-1", "s3cret", ttl=300, now=NOW)
    gateway_id, exp, sig = _decode(token)
    assert gateway_id == "gw-1"
    assert exp == str(int(NOW) + 300)
    assert sig == _expected_sig("gw-1", int(NOW) + 300, "s3cret")
    assert len(sig) == 64 and sig == sig.lower() and set(sig) <= set("0123456789abcdef")
    raw = f"gw-1:{int(NOW) + 300}:{sig}".encode()
    assert token == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_exp_is_whole_seconds() -> None:
    _, exp, _ = _decode(mint_token("gw", "s", ttl=300, now=1000.9))
    assert exp == "1300"


@pytest.mark.parametrize("gateway_id", ["g", "gw", "gw1", "gw12", "~~~~~~", "??>>?>", "ü"])
def test_no_padding_and_urlsafe_alphabet(gateway_id: str) -> None:
    # Ids of varied lengths cover every padding remainder; '~' and '?' produce the 6-bit
    # groups that the standard alphabet spells '+' and '/'.
    token = mint_token(gateway_id, "secret", ttl=300, now=NOW)
    assert "=" not in token
    assert set(token) <= URLSAFE
    assert _decode(token)[0] == gateway_id


def test_url_safe_alphabet_really_exercised() -> None:
    raw = f"~~~~~~:{int(NOW) + 300}:".encode()
    assert b"+" in base64.standard_b64encode(raw) or b"/" in base64.standard_b64encode(raw)


@settings(max_examples=200, deadline=None)
@given(
    gateway_id=st.text(min_size=1, max_size=30).filter(lambda s: ":" not in s),
    secret=st.text(max_size=40),
    ttl=st.integers(0, 10**6),
    now=st.integers(0, 2**40),
)
def test_format_property(gateway_id: str, secret: str, ttl: int, now: int) -> None:
    token = mint_token(gateway_id, secret, ttl=ttl, now=now)
    exp = 0 if ttl == 0 else now + ttl
    raw = f"{gateway_id}:{exp}:{_expected_sig(gateway_id, exp, secret)}".encode()
    assert token == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert verify_token(token, {gateway_id: secret}, now=now) == TokenCheck(True, gateway_id, "ok")


def test_fresh_token_differs_per_dial_time() -> None:
    assert mint_token("gw", "s", ttl=300, now=NOW) != mint_token("gw", "s", ttl=300, now=NOW + 1)


def test_ttl_zero_never_expires() -> None:
    token = mint_token("gw", "s", ttl=0, now=NOW)
    _, exp, sig = _decode(token)
    assert exp == "0"
    assert sig == _expected_sig("gw", 0, "s")
    assert verify_token(token, {"gw": "s"}, now=10**12) == TokenCheck(True, "gw", "ok")


def test_valid_until_exp_inclusive() -> None:
    token = mint_token("gw", "s", ttl=300, now=1000)
    assert verify_token(token, {"gw": "s"}, now=1000).ok
    assert verify_token(token, {"gw": "s"}, now=1300).ok


def test_expired() -> None:
    token = mint_token("gw", "s", ttl=300, now=1000)
    assert verify_token(token, {"gw": "s"}, now=1300.5) == TokenCheck(False, "gw", "expired")
    assert verify_token(token, {"gw": "s"}, now=10**9).reason == "expired"


def test_expired_and_forged_is_not_reported_as_expired() -> None:
    # "expired" tells the gateway it was not revoked; only a genuine token earns it.
    token = _forge("gw:1000:" + "0" * 64)
    check = verify_token(token, {"gw": "s"}, now=5000)
    assert not check.ok
    assert check.reason == "bad signature"


def test_forged_signature() -> None:
    gateway_id, exp, sig = _decode(mint_token("gw", "s", ttl=300, now=NOW))
    flipped = ("0" if sig[0] != "0" else "1") + sig[1:]
    check = verify_token(_forge(f"{gateway_id}:{exp}:{flipped}"), {"gw": "s"}, now=NOW)
    assert check == TokenCheck(False, "gw", "bad signature")


def test_extended_expiry_breaks_signature() -> None:
    _, exp, sig = _decode(mint_token("gw", "s", ttl=300, now=NOW))
    check = verify_token(_forge(f"gw:{int(exp) + 10**6}:{sig}"), {"gw": "s"}, now=NOW)
    assert check.reason == "bad signature"


def test_uppercase_signature_rejected() -> None:
    _, exp, sig = _decode(mint_token("gw", "s", ttl=300, now=NOW))
    assert not verify_token(_forge(f"gw:{exp}:{sig.upper()}"), {"gw": "s"}, now=NOW).ok


def test_wrong_secret() -> None:
    token = mint_token("gw", "s", ttl=300, now=NOW)
    assert verify_token(token, {"gw": "other"}, now=NOW) == TokenCheck(False, "gw", "bad signature")


def test_unknown_gateway() -> None:
    token = mint_token("gw", "s", ttl=300, now=NOW)
    check = verify_token(token, {"other": "s"}, now=NOW)
    assert check == TokenCheck(False, "gw", "unknown gateway")


def test_signature_of_other_gateway_rejected() -> None:
    _, exp, sig = _decode(mint_token("a", "shared", ttl=300, now=NOW))
    check = verify_token(_forge(f"b:{exp}:{sig}"), {"a": "shared", "b": "shared"}, now=NOW)
    assert check.reason == "bad signature"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "!!!!",
        "a",  # one more than a multiple of 4: never valid base64
        "abcde",
        "é",
        "tok en",
        _forge("gw"),
        _forge("gw:123"),
        _forge("gw123sig"),
        _forge("gw:abc:" + "0" * 64),
        _forge("gw::" + "0" * 64),
        _forge("gw:-5:" + "0" * 64),
        _forge("gw:+5:" + "0" * 64),
        _forge("gw: 5:" + "0" * 64),
        _forge("gw:1.5:" + "0" * 64),
        # Unicode digits: str.isdigit() accepts them, int() refuses '²' (used to raise).
        _forge("gw:²:" + "0" * 64),
        _forge("gw:١٢٣:" + "0" * 64),
        base64.urlsafe_b64encode(b"\xff\xfe:1:ab").rstrip(b"=").decode(),
    ],
)
def test_malformed(token: str) -> None:
    check = verify_token(token, {"gw": "s"}, now=NOW)
    assert not check.ok
    assert check.reason == "malformed"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_arbitrary_text_never_raises(token: str) -> None:
    check = verify_token(token, {"gw": "s", "": "s"}, now=NOW)
    assert not check.ok and check.reason


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_payload_never_raises(raw: bytes) -> None:
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    check = verify_token(token, {"gw": "s"}, now=NOW)
    assert not check.ok and check.reason


def test_mint_rejects_colon_in_gateway_id() -> None:
    with pytest.raises(ValueError, match="':'"):
        mint_token("a:b", "s", ttl=300, now=NOW)


def test_mint_rejects_negative_ttl() -> None:
    with pytest.raises(ValueError, match="TTL"):
        mint_token("gw", "s", ttl=-1, now=NOW)


class _Spy:
    def __init__(self, real: Any, answer: bool | None = None) -> None:
        self.real = real
        self.answer = answer
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, a: Any, b: Any) -> bool:
        self.calls.append((a, b))
        real: bool = self.real(a, b)
        return real if self.answer is None else self.answer


def test_the_comparison_is_hmac_compare_digest_by_default() -> None:
    default = inspect.signature(verify_token).parameters["compare"].default
    assert default is hmac.compare_digest


@pytest.mark.parametrize("secret", ["s", "wrong"])
def test_signature_compared_in_constant_time(secret: str) -> None:
    spy = _Spy(hmac.compare_digest)
    token = mint_token("gw", "s", ttl=300, now=NOW)
    check = verify_token(token, {"gw": secret}, now=NOW, compare=spy)
    assert check.ok is (secret == "s")
    assert len(spy.calls) == 1
    presented, expected = spy.calls[0]
    assert bytes(presented).decode() == _decode(token)[2]
    assert bytes(expected).decode() == _expected_sig("gw", int(NOW) + 300, secret)


def test_verdict_follows_compare_digest() -> None:
    # If verify compared with == and only called compare_digest for show, forcing the
    # constant-time comparison to say "different" would not change the verdict.
    spy = _Spy(hmac.compare_digest, answer=False)
    token = mint_token("gw", "s", ttl=300, now=NOW)
    assert verify_token(token, {"gw": "s"}, now=NOW, compare=spy).reason == "bad signature"
