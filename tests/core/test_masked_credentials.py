"""A proxy URL's user:password never shows in a config's repr (issue 23)."""

from __future__ import annotations

import pytest

from trio_relay import RelayConfig
from trio_relay._core.url import masked_credentials


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pw@proxy:3128", "http://***@proxy:3128"),
        ("http://user@proxy:3128", "http://***@proxy:3128"),
        ("http://us%40er:p@ss@proxy:3128/x?y#z", "http://***@proxy:3128/x?y#z"),
        ("user:pw@proxy:3128", "***@proxy:3128"),
        ("http://user:pw@[::1]:3128", "http://***@[::1]:3128"),
        ("http://user:pw@proxy:notaport", "http://***@proxy:notaport"),
        ("http://proxy:3128", "http://proxy:3128"),
        ("http://proxy:3128/a@b", "http://proxy:3128/a@b"),
        ("socks5h://u:p@localhost:1080", "socks5h://***@localhost:1080"),
    ],
)
def test_masked_credentials(url: str, expected: str) -> None:
    assert masked_credentials(url) == expected


def test_the_proxy_password_is_not_in_the_config_repr() -> None:
    config = RelayConfig(proxy="http://alice:s3cret-pw@proxy.example:3128")
    text = repr(config)
    assert "s3cret-pw" not in text and "alice" not in text
    assert "proxy='http://***@proxy.example:3128'" in text
    # the other fields are still there, as the generated repr had them
    assert "ping_interval=10.0" in text and "ssl_context" not in text


@pytest.mark.parametrize("setting", [True, False])
def test_a_boolean_proxy_setting_reads_as_itself(setting: bool) -> None:
    assert f"proxy={setting!r}" in repr(RelayConfig(proxy=setting))
