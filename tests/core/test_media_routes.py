from __future__ import annotations

import pytest

from trio_relay import MediaError
from trio_relay._core.media import ConnectorRoutes, parse_upload_answer


@pytest.mark.parametrize(
    ("relay_url", "base"),
    [
        ("https://connector.example", "https://connector.example"),
        ("https://connector.example/relay", "https://connector.example"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("wss://c.example/gw/relay", "https://c.example/gw"),
        ("https://user:pw@c.example:8443", "https://c.example:8443"),  # never user info
    ],
)
def test_routes_live_beside_relay(relay_url: str, base: str) -> None:
    routes = ConnectorRoutes.from_relay_url(relay_url)
    assert routes.base == base
    assert routes.media == f"{base}/relay/media"
    assert routes.policy == f"{base}/relay/policy"
    assert routes.media_url("abc") == f"{base}/relay/media/abc"


@pytest.mark.parametrize(
    ("url", "own"),
    [
        ("https://c.example/relay/media/abc", True),
        ("https://C.EXAMPLE:443/relay/media/abc", True),  # same origin, spelled otherwise
        ("https://c.example/relay/media/", True),
        ("http://c.example/relay/media/abc", False),  # another scheme is another origin
        ("https://c.example:8443/relay/media/abc", False),  # another port
        ("https://c.example.evil/relay/media/abc", False),  # another host
        ("https://evil.example/relay/media/abc?https://c.example/relay/media/", False),
        ("https://c.example/relay/mediax/abc", False),  # not under /relay/media/
        ("https://c.example/relay/media", False),
        ("https://c.example/relay/policy", False),
        ("https://c.example/relay/media/../policy", False),
        ("https://c.example/other/relay/media/abc", False),
        ("not a url", False),
    ],
)
def test_only_the_connectors_own_media_is_own(url: str, own: bool) -> None:
    assert ConnectorRoutes("https://c.example").is_own_media(url) is own


def test_upload_answer_gives_the_source_url() -> None:
    routes = ConnectorRoutes("https://c.example")
    assert parse_upload_answer({"id": "m1", "size": 3}, routes) == (
        "https://c.example/relay/media/m1"
    )


@pytest.mark.parametrize("answer", [None, [], {}, {"id": 3}, {"id": ""}, {"id": "../x/y"}])
def test_a_bad_upload_answer_is_a_clear_error(answer: object) -> None:
    with pytest.raises(MediaError, match="no usable id"):
        parse_upload_answer(answer, ConnectorRoutes("https://c.example"))
