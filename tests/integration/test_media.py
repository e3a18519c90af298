"""relay.media and RelayConfig(download_media=True) against the reference connector's
HTTP routes (same port as /relay, bearer checked), over real loopback sockets. Real
time: the retries' backoff (0.5 s, 1 s) and stall guards are short."""

from __future__ import annotations

import contextlib
import http.server
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from relay_support import chat_event

import trio_relay
from trio_relay import MediaError, MediaTooLarge, MessageEvent, RelayConfig, UpgradeAuth
from trio_relay.testing import ReferenceConnector, open_connector

SECRET = "media-secret-value"
AUTH = UpgradeAuth("gw", SECRET)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector(secrets={"gw": SECRET}) as running:
        yield running


@contextlib.asynccontextmanager
async def relay_on(
    connector: ReferenceConnector, config: RelayConfig | None = None, **kwargs: Any
) -> AsyncIterator[trio_relay.Relay]:
    async with trio_relay.open_relay(connector.url, auth=AUTH, config=config, **kwargs) as relay:
        await relay.wait_connected(timeout=10)
        yield relay


class Recorder(http.server.BaseHTTPRequestHandler):
    """Another origin: serves a body and records each request's headers."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        self.send_response(200)
        if self.path.startswith("/chunked"):
            # No Content-Length: only counting the bytes as they come can enforce a cap.
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(PNG), 1000):
                piece = PNG[start : start + 1000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_origin() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


# --- upload -------------------------------------------------------------------------------


async def test_upload_bytes_returns_the_source_url(connector: ReferenceConnector) -> None:
    async with relay_on(connector) as relay:
        url = await relay.media.upload(PNG, "image/png", filename="cat.png")
    media_id = url.rsplit("/", 1)[1]
    assert url == f"{connector.url}/relay/media/{media_id}"
    stored = connector.routes.media[media_id]
    assert (stored.data, stored.content_type, stored.filename) == (PNG, "image/png", "cat.png")
    assert stored.gateway_id == "gw"  # the bearer named us
    [request] = connector.routes.requests
    assert (request.method, request.status, request.had_bearer) == ("POST", 200, True)


async def test_upload_a_file_names_it_after_the_file(
    connector: ReferenceConnector, tmp_path: Path
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.7 hello")
    async with relay_on(connector) as relay:
        url = await relay.media.upload(path, "application/pdf")
        assert await relay.media.download(url) == b"%PDF-1.7 hello"
    stored = connector.routes.media[url.rsplit("/", 1)[1]]
    assert stored.filename == "report.pdf"


async def test_upload_over_our_cap_is_refused_before_sending(
    connector: ReferenceConnector,
) -> None:
    async with relay_on(connector, RelayConfig(media_max_bytes=1000)) as relay:
        with pytest.raises(MediaTooLarge, match="over the 1000 bytes cap"):
            await relay.media.upload(b"x" * 1001, "application/octet-stream")
    assert connector.routes.requests == []


async def test_upload_refused_with_413_says_too_large(connector: ReferenceConnector) -> None:
    connector.routes.max_media_bytes = 1000
    async with relay_on(connector) as relay:
        with pytest.raises(MediaTooLarge, match="HTTP 413"):
            await relay.media.upload(b"x" * 5000, "application/octet-stream")
        # The connection survived the refusal: the next upload works.
        assert await relay.media.upload(b"small", "text/plain")


async def test_server_errors_are_retried_with_backoff(connector: ReferenceConnector) -> None:
    connector.routes.fail_next(503, 2)
    async with relay_on(connector) as relay:
        start = trio.current_time()
        url = await relay.media.upload(b"third time lucky", "text/plain")
        waited = trio.current_time() - start
    assert [r.status for r in connector.routes.requests] == [503, 503, 200]
    assert waited >= 0.5 + 1.0  # the backoff was slept, not skipped
    assert connector.routes.media[url.rsplit("/", 1)[1]].data == b"third time lucky"


async def test_server_errors_beyond_the_retries_fail_clearly(
    connector: ReferenceConnector,
) -> None:
    connector.routes.fail_next(502, 3)
    async with relay_on(connector) as relay:
        with pytest.raises(MediaError, match="HTTP 502"):
            await relay.media.upload(b"never", "text/plain")
    assert len(connector.routes.requests) == 3


async def test_client_errors_are_not_retried(connector: ReferenceConnector) -> None:
    connector.routes.fail_next(400)
    async with relay_on(connector) as relay:
        with pytest.raises(MediaError, match="HTTP 400"):
            await relay.media.upload(b"bad", "text/plain")
    assert len(connector.routes.requests) == 1


async def test_a_refused_bearer_names_the_credentials(caplog: pytest.LogCaptureFixture) -> None:
    async with (
        open_connector(secrets={"gw": "another-secret"}) as connector,
        trio_relay.open_relay(connector.url, auth=AUTH) as relay,
    ):
        with pytest.raises(MediaError, match="UpgradeAuth") as caught:
            await relay.media.upload(b"data", "text/plain")
    assert SECRET not in str(caught.value) and SECRET not in caplog.text


# --- download -----------------------------------------------------------------------------


async def test_download_to_bytes_and_to_a_file(
    connector: ReferenceConnector, tmp_path: Path
) -> None:
    url = connector.routes.host_media(PNG, "image/png", gateway_id="gw")
    async with relay_on(connector) as relay:
        assert await relay.media.download(url) == PNG
        target = await relay.media.download(url, tmp_path / "cat.png")
    assert target == tmp_path / "cat.png" and target.read_bytes() == PNG
    assert all(r.had_bearer and r.gateway_id == "gw" for r in connector.routes.requests)


async def test_expired_media_is_a_clear_error(connector: ReferenceConnector) -> None:
    url = connector.routes.host_media(PNG)
    connector.routes.media_ttl = -1  # everything stored is past its hour
    async with relay_on(connector) as relay:
        with pytest.raises(MediaError, match=r"404.*expire"):
            await relay.media.download(url)


async def test_download_over_the_cap_is_refused(
    connector: ReferenceConnector, tmp_path: Path
) -> None:
    url = connector.routes.host_media(PNG)
    async with relay_on(connector, RelayConfig(media_max_bytes=1000)) as relay:
        with pytest.raises(MediaTooLarge):
            await relay.media.download(url, tmp_path / "big.png")
    assert not (tmp_path / "big.png").exists()


async def test_an_over_cap_body_without_a_length_is_cut_off(
    connector: ReferenceConnector,
    other_origin: tuple[str, list[dict[str, str]]],
    tmp_path: Path,
) -> None:
    url, _ = other_origin
    async with relay_on(connector) as relay:  # under the default cap it arrives whole
        assert await relay.media.download(f"{url}/chunked") == PNG
    async with relay_on(connector, RelayConfig(media_max_bytes=4000)) as relay:
        with pytest.raises(MediaTooLarge, match="over the 4000 bytes cap"):
            await relay.media.download(f"{url}/chunked", tmp_path / "big.bin")
    assert not (tmp_path / "big.bin").exists()


async def test_a_stalled_download_is_abandoned_and_its_file_removed(
    connector: ReferenceConnector, tmp_path: Path
) -> None:
    url = connector.routes.host_media(PNG)
    connector.routes.stall_next_download()
    async with relay_on(connector, RelayConfig(media_stall_timeout=0.5)) as relay:
        with pytest.raises(MediaError, match=r"stalled|ReadTimeout"):
            await relay.media.download(url, tmp_path / "half.png")
        assert not (tmp_path / "half.png").exists()
        assert await relay.media.download(url) == PNG  # the next one is whole


async def test_no_bearer_to_another_origin(
    connector: ReferenceConnector, other_origin: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = other_origin
    async with relay_on(connector) as relay:
        assert await relay.media.download(f"{url}/relay/media/abc") == PNG
    assert [h.get("Authorization") for h in seen] == [None]


async def test_no_bearer_on_a_redirect(
    connector: ReferenceConnector, other_origin: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = other_origin
    elsewhere = connector.routes.host_media(PNG)
    connector.routes.redirect(elsewhere, f"{url}/file.png")
    back_home = connector.routes.host_media(PNG)
    connector.routes.redirect(back_home, connector.routes.host_media(PNG))
    async with relay_on(connector) as relay:
        assert await relay.media.download(elsewhere) == PNG
        # Even a redirect to the connector's own media route goes without the token,
        # which the connector then refuses.
        with pytest.raises(MediaError, match="HTTP 401"):
            await relay.media.download(back_home)
    assert [h.get("Authorization") for h in seen] == [None]
    assert [r.had_bearer for r in connector.routes.requests] == [True, True, False]


# --- RelayConfig(download_media=True) ------------------------------------------------------


def media_event(message_id: str, *urls: str) -> dict[str, Any]:
    event = chat_event("look", message_id)
    event["media_urls"] = list(urls)
    event["media"] = [{"url": u, "mime": "image/png", "kind": "photo", "filename": "cat.png"}
                      for u in urls]  # fmt: skip
    return event


async def test_inbound_media_is_downloaded_before_the_handler_and_deleted_after(
    connector: ReferenceConnector, other_origin: tuple[str, list[dict[str, str]]]
) -> None:
    public_url, seen = other_origin
    hosted = connector.routes.host_media(PNG, "image/png", gateway_id="gw")
    during: list[tuple[Path | None, bytes | None]] = []
    done = trio.Event()
    events: list[MessageEvent] = []

    async def handle(event: MessageEvent) -> None:
        events.append(event)
        for item in event.media:
            during.append((item.path, item.path.read_bytes() if item.path else None))
        done.set()

    config = RelayConfig(download_media=True)
    async with relay_on(connector, config, on_message=handle):
        await connector.send_inbound(media_event("m1", hosted, f"{public_url}/pub.png"))
        with trio.fail_after(10):
            await done.wait()
    [(path, data), (public_path, _)] = during
    assert data == PNG and path is not None and path.name.endswith("cat.png")
    assert not path.exists() and not path.parent.exists()  # deleted after the handler
    assert public_path is None and seen == []  # platform-public media is left alone
    assert events[0].media[1].url == f"{public_url}/pub.png"


async def test_a_failed_inbound_download_still_delivers_the_message(
    connector: ReferenceConnector, caplog: pytest.LogCaptureFixture
) -> None:
    expired = connector.routes.host_media(PNG)
    connector.routes.media_ttl = -1
    events: list[MessageEvent] = []
    done = trio.Event()

    async def handle(event: MessageEvent) -> None:
        events.append(event)
        done.set()

    with caplog.at_level(logging.WARNING, logger="trio_relay"):
        async with relay_on(connector, RelayConfig(download_media=True), on_message=handle):
            await connector.send_inbound(media_event("m2", expired))
            with trio.fail_after(10):
                await done.wait()
    assert events[0].text == "look" and events[0].media[0].path is None
    assert "inbound media 0 of message m2 not downloaded" in caplog.text
    assert SECRET not in caplog.text


async def test_without_download_media_nothing_is_fetched(connector: ReferenceConnector) -> None:
    hosted = connector.routes.host_media(PNG)
    events: list[MessageEvent] = []
    done = trio.Event()

    async def handle(event: MessageEvent) -> None:
        events.append(event)
        done.set()

    async with relay_on(connector, on_message=handle):
        await connector.send_inbound(media_event("m3", hosted))
        with trio.fail_after(10):
            await done.wait()
    assert events[0].media[0].path is None
    assert connector.routes.requests == []
