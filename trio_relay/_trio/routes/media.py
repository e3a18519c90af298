"""The media plane: ``relay.media.upload()`` / ``download()`` over the connector's HTTP
routes, and the download of re-hosted inbound media on receipt
(``RelayConfig(download_media=True)``).

Re-hosted media (``{base}/relay/media/{id}``) expire after about an hour, so they are
fetched when the message arrives, not when a handler gets round to them: each into a
temporary directory that lives exactly as long as the handler call. A failed download
never costs the message: it is logged, ``path`` stays ``None`` and the handler runs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import overload

import trio

from ..._core.event import Media, MessageEvent
from ..._core.media import MediaError, MediaTooLarge, parse_upload_answer
from ..._core.settings import RoutesSettings
from ...http._stall import StreamStalled, stall_timeout
from .client import ConnectorHttp

__all__ = ["RelayMedia", "with_media_downloads"]

logger = logging.getLogger("trio_relay")

_CHUNK = 1 << 16


class RelayMedia:
    """``relay.media``: media to and from the connector (see the module docstring)."""

    __slots__ = ("_http", "_max", "_stall")  # no __dict__: one per relay

    def __init__(self, http: ConnectorHttp, settings: RoutesSettings) -> None:
        self._http = http
        self._max = settings.media_max_bytes
        self._stall = settings.stall_timeout

    def _mb(self) -> str:
        mib = 1024 * 1024
        return f"{self._max / mib:g} MB" if self._max % mib == 0 else f"{self._max} bytes"

    async def upload(
        self,
        data_or_path: bytes | str | os.PathLike[str],
        content_type: str,
        filename: str | None = None,
    ) -> str:
        """Upload media (bytes, or a file's path) and return the ``source_url`` to put
        in a ``send_media`` action. Raises [`MediaTooLarge`][trio_relay.MediaTooLarge] over the
        size cap
        (``RelayConfig.media_max_bytes``, or the connector's 413),
        [`MediaError`][trio_relay.MediaError]
        for any other failure, after retrying 5xx answers and transport failures."""
        if isinstance(data_or_path, bytes | bytearray | memoryview):
            data = bytes(data_or_path)
        else:
            path = trio.Path(data_or_path)
            if (await path.stat()).st_size > self._max:
                raise MediaTooLarge(f"{os.fspath(data_or_path)!r} is over {self._mb()}")
            data = await path.read_bytes()
            filename = filename if filename is not None else path.name
        if len(data) > self._max:
            raise MediaTooLarge(
                f"media of {len(data)} bytes is over the {self._mb()} cap; send a smaller "
                "file or raise RelayConfig.media_max_bytes if the connector allows it"
            )
        headers = {"content-type": content_type}
        if filename:
            headers["x-media-filename"] = filename
        try:
            response = await self._http.send(
                "POST", self._http.routes.media, content=data, headers=headers
            )
        except Exception as exc:
            raise MediaError(f"media upload failed: {_describe(exc)}") from exc
        try:
            await response.aread()
        finally:
            await response.aclose()
        if response.status_code == 413:
            raise MediaTooLarge(
                f"the connector refused {len(data)} bytes of media as too large (HTTP 413)"
            )
        if not response.is_success:
            raise MediaError(_status_message("upload", response.status_code))
        try:
            answer = response.json()
        except ValueError:
            answer = None
        return parse_upload_answer(answer, self._http.routes)

    @overload
    async def download(self, url: str, dest: None = None) -> bytes: ...
    @overload
    async def download(self, url: str, dest: str | os.PathLike[str]) -> Path: ...

    async def download(self, url: str, dest: str | os.PathLike[str] | None = None) -> bytes | Path:
        """Fetch media: into ``dest`` (a file path, returned as a ``Path``) or, without
        it, as bytes. The bearer token goes only to the connector's own
        ``/relay/media/`` URLs. Raises [`MediaTooLarge`][trio_relay.MediaTooLarge] over the size
        cap,
        [`MediaError`][trio_relay.MediaError] for a 404 (unknown or expired), a stall
        (``RelayConfig.media_stall_timeout``) or any other failure; a partial file is
        removed."""
        try:
            response = await self._http.send("GET", url)
        except Exception as exc:
            raise MediaError(f"media download failed: {_describe(exc)}") from exc
        target = None if dest is None else Path(dest)
        try:
            if response.status_code == 404:
                raise MediaError(
                    "media not found (HTTP 404): re-hosted media expire after about an hour; "
                    "download on receipt (RelayConfig(download_media=True))"
                )
            if not response.is_success:
                raise MediaError(_status_message("download", response.status_code))
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max:
                raise MediaTooLarge(f"media of {declared} bytes is over the {self._mb()} cap")
            return await self._receive(response.aiter_bytes(_CHUNK), target)
        except BaseException:
            if target is not None:
                target.unlink(missing_ok=True)
            raise
        finally:
            await response.aclose()

    async def _receive(self, chunks: AsyncIterator[bytes], target: Path | None) -> bytes | Path:
        received = 0
        body = bytearray()
        file = None if target is None else await trio.open_file(target, "wb")
        try:
            guarded = stall_timeout(chunks, self._stall)
            async with aclosing(guarded):
                async for chunk in guarded:
                    received += len(chunk)
                    if received > self._max:
                        raise MediaTooLarge(f"media is over the {self._mb()} cap")
                    if file is None:
                        body += chunk
                    else:
                        await file.write(chunk)
        except StreamStalled as exc:
            raise MediaError(f"media download stalled: {exc}") from exc
        except MediaError:
            raise
        except Exception as exc:
            raise MediaError(f"media download failed: {_describe(exc)}") from exc
        finally:
            if file is not None:
                await file.aclose()
        return bytes(body) if target is None else target

    async def fetch_inbound(self, event: MessageEvent, directory: Path) -> MessageEvent:
        """``event`` with each re-hosted media item downloaded into ``directory``
        (``media[i].path``); failures are logged and leave ``path`` as ``None``."""
        media = event.media or tuple(Media(url=url) for url in event.media_urls)
        fetched = []
        for index, item in enumerate(media):
            if self._http.routes.is_own_media(item.url):
                name = Path(item.filename or "").name or item.url.rsplit("/", 1)[-1]
                dest = directory / f"{index}-{name}"
                try:
                    item = dataclasses.replace(item, path=await self.download(item.url, dest))
                except MediaError as exc:
                    logger.warning("inbound media %d of message %s not downloaded: %s",
                                   index, event.message_id, exc,
                                   extra={"cause": type(exc).__name__})  # fmt: skip
            fetched.append(item)
        return dataclasses.replace(event, media=tuple(fetched))


MessageHandler = Callable[[MessageEvent], Awaitable[None]]


def with_media_downloads(on_message: MessageHandler, media: RelayMedia) -> MessageHandler:
    """``on_message`` preceded by the download of the event's re-hosted media into a
    fresh temporary directory, which is deleted when the handler returns or fails."""

    async def handle(event: MessageEvent) -> None:
        directory = Path(tempfile.mkdtemp(prefix="trio-relay-media-"))
        try:
            await on_message(await media.fetch_inbound(event, directory))
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, directory, True)

    return handle


def _describe(exc: BaseException) -> str:
    # Never the request: its headers hold the bearer token.
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _status_message(what: str, status: int) -> str:
    if status in (401, 403):
        return (f"media {what} refused with HTTP {status}: the connector did not accept the "
                "bearer token; check UpgradeAuth (gateway id and secret)")  # fmt: skip
    return f"media {what} failed with HTTP {status} from the connector"
