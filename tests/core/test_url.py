"""normalize_url: the base URL → relay WebSocket URL rules of docs/protocol.md, "Transport"."""

from __future__ import annotations

import string
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.url import normalize_url

SETTINGS = settings(max_examples=200, deadline=None)


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        # scheme mapping
        ("http://connector.example", "ws://connector.example/relay"),
        ("https://connector.example", "wss://connector.example/relay"),
        ("ws://connector.example", "ws://connector.example/relay"),
        ("wss://connector.example", "wss://connector.example/relay"),
        ("HTTPS://connector.example", "wss://connector.example/relay"),
        ("Ws://connector.example", "ws://connector.example/relay"),
        # trailing slashes stripped before /relay is appended
        ("https://connector.example/", "wss://connector.example/relay"),
        ("https://connector.example///", "wss://connector.example/relay"),
        ("https://connector.example/api/", "wss://connector.example/api/relay"),
        ("https://connector.example/api//", "wss://connector.example/api/relay"),
        # /relay not doubled when the path already ends with it
        ("https://connector.example/relay", "wss://connector.example/relay"),
        ("https://connector.example/relay/", "wss://connector.example/relay"),
        ("https://connector.example/api/relay", "wss://connector.example/api/relay"),
        ("wss://connector.example/relay//", "wss://connector.example/relay"),
        # ...but a path that merely contains "relay" is not the relay endpoint
        ("https://connector.example/myrelay", "wss://connector.example/myrelay/relay"),
        ("https://connector.example/relay/v2", "wss://connector.example/relay/v2/relay"),
        ("https://connector.example/relays", "wss://connector.example/relays/relay"),
        # query kept (after the appended path), port and userinfo kept
        ("https://connector.example?token=a", "wss://connector.example/relay?token=a"),
        ("https://connector.example/?a=1&b=2", "wss://connector.example/relay?a=1&b=2"),
        ("https://connector.example/x/?a=/", "wss://connector.example/x/relay?a=/"),
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/relay"),
        ("http://[::1]:8080/", "ws://[::1]:8080/relay"),
        ("https://u:p@connector.example:8443/r", "wss://u:p@connector.example:8443/r/relay"),
        # surrounding whitespace (pasted config) is ignored
        ("  https://connector.example/ \n", "wss://connector.example/relay"),
    ],
)
def test_normalize(base: str, expected: str) -> None:
    assert normalize_url(base) == expected


def test_fragment_is_dropped() -> None:
    # A fragment is never sent to the server; keeping it would only confuse the dialer.
    assert normalize_url("https://c.example/x#frag") == "wss://c.example/x/relay"


@pytest.mark.parametrize(
    "base",
    [
        "https://connector.example/api?x=1",
        "http://h/relay",
        "ws://h:1/a/b/",
        "wss://u:p@h/relay/",
    ],
)
def test_idempotent_examples(base: str) -> None:
    once = normalize_url(base)
    assert normalize_url(once) == once


_SEGMENT = st.text(string.ascii_letters + string.digits + "-._~%", min_size=0, max_size=8)
_HOST = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True),
    st.just("127.0.0.1"),
    st.just("[::1]"),
)


@st.composite
def base_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "ws", "wss", "HTTP", "Https"]))
    host = draw(_HOST)
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    segments = draw(st.lists(st.one_of(_SEGMENT, st.just("relay")), max_size=4))
    slashes = "/" * draw(st.integers(0, 3))
    query = draw(st.one_of(st.none(), st.text(string.ascii_letters + "=&/", max_size=10)))
    url = f"{scheme}://{host}{f':{port}' if port else ''}"
    if segments:
        url += "/" + "/".join(segments)
    url += slashes
    if query is not None:
        url += "?" + query
    return url


@SETTINGS
@given(base_urls())
def test_idempotent_property(base: str) -> None:
    once = normalize_url(base)
    assert normalize_url(once) == once
    parts = urlsplit(once)
    assert parts.scheme in ("ws", "wss")
    assert parts.path.endswith("/relay")


@SETTINGS
@given(base_urls())
def test_property_keeps_scheme_security_and_query(base: str) -> None:
    src, out = urlsplit(base), urlsplit(normalize_url(base))
    # TLS is never silently dropped or added.
    assert (out.scheme == "wss") == (src.scheme.lower() in ("https", "wss"))
    assert out.query == src.query
    assert out.netloc == src.netloc


@pytest.mark.parametrize(
    "base",
    [
        "ftp://user:Z9qSecretPw@connector.example",
        "file:///etc/passwd",
        "mailto:user@connector.example",
        "connector.example",
        "connector.example:443",
        "user:Z9qSecretPw@connector.example",
        "",
        "//connector.example/relay",
    ],
)
def test_bad_scheme_rejected(base: str) -> None:
    with pytest.raises(ValueError, match="scheme"):
        normalize_url(base)


@pytest.mark.parametrize(
    "base",
    [
        "https://",
        "https:///relay",
        "wss://:443/relay",
        "https://user:Z9qSecretPw@/relay",
        "https://user:Z9qSecretPw@:8443",
    ],
)
def test_no_host_rejected(base: str) -> None:
    with pytest.raises(ValueError, match="host"):
        normalize_url(base)


@pytest.mark.parametrize(
    "base",
    [
        "ftp://user:Z9qSecretPw@connector.example/x",
        "gopher://admin:Z9qSecretPw@h",
        "https://user:Z9qSecretPw@/relay",
        "https://user:Z9qSecretPw@:8443",
        "user:Z9qSecretPw@connector.example",
    ],
)
def test_error_never_repeats_the_password(base: str) -> None:
    with pytest.raises(ValueError) as info:
        normalize_url(base)
    assert "Z9qSecretPw" not in str(info.value)
    assert "Z9qSecretPw" not in repr(info.value.args)


@SETTINGS
@given(
    password=st.text(string.ascii_letters + string.digits, min_size=6, max_size=20),
    scheme=st.sampled_from(["ftp", "smtp", "redis", "https", "wss"]),
    host=st.sampled_from(["", "connector.example"]),
)
def test_error_never_repeats_the_password_property(password: str, scheme: str, host: str) -> None:
    secret = "Q7" + password  # a prefix no error text contains by chance
    base = f"{scheme}://user:{secret}@{host}/relay"
    if scheme in ("https", "wss") and host:
        return  # a valid URL: nothing to reject
    with pytest.raises(ValueError) as info:
        normalize_url(base)
    assert secret not in str(info.value)
