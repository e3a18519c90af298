"""The reference connector's HTTP routes, on the same port as ``/relay``
(docs/protocol.md, "HTTP routes"): ``POST /relay/media`` (upload), ``GET
/relay/media/{id}`` (download of uploaded or re-hosted media) and ``POST /relay/policy``
(the gateway's relevance policy, recorded), each behind the same bearer token as the
upgrade.

A connection's first request decides what it is: `HttpRoutes.serve` reads the
request head (with h11); a plain request to one of these paths is served here, on that
connection, for as long as the client keeps it alive; anything else (the WebSocket
upgrade) is handed back untouched, bytes and all, to the WebSocket server.

Faults for tests: `HttpRoutes.fail_next` (answer with a status, e.g. 503, a number
of times), `HttpRoutes.stall_next_download` (send half the body, then nothing),
`HttpRoutes.redirect` (answer a media id with a redirect elsewhere).
"""

from __future__ import annotations

import collections
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import h11
import trio

from .._core.token import verify_token

__all__ = ["MEDIA_PATH", "POLICY_PATH", "HttpRoutes", "RouteRequest", "StoredMedia"]

MEDIA_PATH = "/relay/media"
POLICY_PATH = "/relay/policy"
MAX_MEDIA_BYTES = 25 * 1024 * 1024
MEDIA_TTL = 3600.0
"""Re-hosted and uploaded media expire after about an hour."""
_HEAD_LIMIT = 64 * 1024
_RECEIVE = 1 << 16
ANONYMOUS = "anonymous"


class RewindableStream(Protocol):
    """What `HttpRoutes.serve` needs of a stream: bytes in and out, and a way to
    put back bytes it read so that the WebSocket server reads them first."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray: ...

    async def send_all(self, data: bytes | bytearray | memoryview) -> None: ...

    def unread(self, data: bytes) -> None: ...


async def _next_event(
    connection: h11.Connection, stream: RewindableStream, consumed: bytearray | None = None
) -> Any:
    """The next h11 event, reading from ``stream`` while h11 needs data (each read also
    appended to ``consumed`` when given); ``None`` when the bytes are not HTTP h11 can
    parse. At end of stream h11 answers ``ConnectionClosed`` (or, mid-request, ``None``)."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return None
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(_RECEIVE)
        if consumed is not None:
            consumed += data
        connection.receive_data(bytes(data))


@dataclass
class StoredMedia:
    data: bytes
    content_type: str
    filename: str | None
    stored_at: float
    gateway_id: str
    redirect_to: str | None = None


@dataclass(frozen=True)
class RouteRequest:
    """One HTTP request the routes answered: for tests to assert on (no token kept)."""

    method: str
    path: str
    status: int
    gateway_id: str | None
    """Who the bearer token named; ``None`` when it was missing or refused."""
    had_bearer: bool


@dataclass
class HttpRoutes:
    """State and handlers of the connector's HTTP routes (see the module docstring)."""

    secrets: dict[str, str] | None
    clock: Callable[[], float]
    base_url: Callable[[], str]
    max_media_bytes: int = MAX_MEDIA_BYTES
    media_ttl: float = MEDIA_TTL
    media: dict[str, StoredMedia] = field(default_factory=dict)
    policies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(gateway id, JSON body) of every accepted ``POST /relay/policy``, in order."""
    requests: list[RouteRequest] = field(default_factory=list)
    _failures: collections.deque[int] = field(default_factory=collections.deque)
    _stall_downloads: int = 0
    _changed: trio.Event = field(default_factory=trio.Event)

    # --- for tests and for inbound events -------------------------------------------------

    def host_media(
        self,
        data: bytes,
        content_type: str = "application/octet-stream",
        filename: str | None = None,
        *,
        gateway_id: str = ANONYMOUS,
    ) -> str:
        """Store ``data`` as re-hosted media and return its URL (``{base}/relay/media/
        {id}``), to put in an inbound event's ``media_urls``/``media``."""
        media_id = secrets.token_hex(8)
        self.media[media_id] = StoredMedia(data, content_type, filename, self.clock(), gateway_id)
        return self.media_url(media_id)

    def media_url(self, media_id: str) -> str:
        return f"{self.base_url()}{MEDIA_PATH}/{media_id}"

    def fail_next(self, status: int, count: int = 1) -> None:
        """Answer the next ``count`` route requests with ``status`` (and no effect)."""
        self._failures.extend([status] * count)

    def stall_next_download(self, count: int = 1) -> None:
        """The next ``count`` downloads send their headers and half the body, then hang."""
        self._stall_downloads += count

    def redirect(self, media_url: str, location: str) -> None:
        """Answer downloads of ``media_url`` with a ``302`` to ``location``."""
        self.media[media_url.rsplit("/", 1)[-1]].redirect_to = location

    async def wait_policies(self, count: int = 1) -> None:
        while len(self.policies) < count:
            await self._changed.wait()

    async def wait_requests(self, count: int = 1) -> None:
        while len(self.requests) < count:
            await self._changed.wait()

    # --- serving --------------------------------------------------------------------------

    @staticmethod
    def handles(path: str) -> bool:
        path = path.split("?", 1)[0]
        return path in (MEDIA_PATH, POLICY_PATH) or path.startswith(MEDIA_PATH + "/")

    async def serve(self, stream: RewindableStream) -> bool:
        """Serve the connection if its first request is one of the routes (then return
        ``True`` once it is over); otherwise put back what was read and return
        ``False``."""
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEAD_LIMIT)
        consumed = bytearray()
        first = True
        while True:
            # Until the first request proves to be ours, every byte read is kept, to hand
            # back untouched. Not HTTP we can parse (None) is the WebSocket server's to judge.
            event = await _next_event(connection, stream, consumed if first else None)
            if isinstance(event, h11.Request):
                target = event.target.decode("latin-1")
                upgrade = any(name == b"upgrade" for name, _ in event.headers)
                if first and (upgrade or not self.handles(target)):
                    stream.unread(bytes(consumed))
                    return False
                first = False
                await self._answer(connection, stream, event, target)
                if h11.MUST_CLOSE in (connection.our_state, connection.their_state):
                    return True
                try:
                    connection.start_next_cycle()
                except h11.LocalProtocolError:
                    return True
                continue
            # EOF, a protocol error or the peer closing: this connection is over.
            if first:
                stream.unread(bytes(consumed))
                return False
            return True

    async def _answer(
        self, connection: h11.Connection, stream: RewindableStream, request: h11.Request,
        target: str,
    ) -> None:  # fmt: skip
        headers = {name.decode("latin-1").lower(): value.decode("latin-1")
                   for name, value in request.headers}  # fmt: skip
        method = request.method.decode("ascii")
        path = target.split("?", 1)[0]
        gateway_id = self._bearer(headers)
        body, too_large = await self._read_body(connection, stream, headers)
        status, reply_headers, reply, stall = self._route(method, path, gateway_id, headers, body,
                                                          too_large)  # fmt: skip
        self.requests.append(RouteRequest(method, path, status, gateway_id,
                                          "authorization" in headers))  # fmt: skip
        self._changed.set()
        self._changed = trio.Event()
        await self._send(connection, stream, status, reply_headers, reply, stall=stall)

    def _bearer(self, headers: dict[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if self.secrets is None:
            return ANONYMOUS
        if not token:
            return None
        check = verify_token(token, self.secrets, now=self.clock())
        return check.gateway_id if check.ok else None

    async def _read_body(
        self, connection: h11.Connection, stream: RewindableStream, headers: dict[str, str]
    ) -> tuple[bytes, bool]:
        # An over-cap body is still read (and dropped): answering 413 while the client
        # is still sending would reach it as a broken pipe instead of the status.
        body = bytearray()
        too_large = False
        while True:
            event = await _next_event(connection, stream)
            if isinstance(event, h11.Data):
                if not too_large:
                    body += event.data
                    if len(body) > self.max_media_bytes:
                        too_large, body = True, bytearray()
            else:
                return bytes(body), too_large

    def _route(
        self, method: str, path: str, gateway_id: str | None, headers: dict[str, str],
        body: bytes, too_large: bool,
    ) -> tuple[int, list[tuple[str, str]], bytes, bool]:  # fmt: skip
        json_type = [("content-type", "application/json")]
        if self._failures:
            return self._failures.popleft(), [], b"injected failure\n", False
        if gateway_id is None:
            return 401, [], b"bad or missing bearer token\n", False
        if method == "POST" and path == MEDIA_PATH:
            if too_large:
                return 413, [], b"media over the size cap\n", False
            media_id = secrets.token_hex(8)
            content_type = headers.get("content-type", "application/octet-stream")
            self.media[media_id] = StoredMedia(body, content_type, headers.get("x-media-filename"),
                                               self.clock(), gateway_id)  # fmt: skip
            answer = {"id": media_id, "size": len(body)}
            return 200, json_type, json.dumps(answer).encode(), False
        if method == "GET" and path.startswith(MEDIA_PATH + "/"):
            stored = self.media.get(path[len(MEDIA_PATH) + 1 :])
            if stored is None or self.clock() - stored.stored_at > self.media_ttl:
                return 404, [], b"unknown or expired media\n", False
            if stored.redirect_to is not None:
                return 302, [("location", stored.redirect_to)], b"", False
            stall = self._stall_downloads > 0
            self._stall_downloads -= stall
            return 200, [("content-type", stored.content_type)], stored.data, stall
        if method == "POST" and path == POLICY_PATH:
            try:
                policy = json.loads(body)
            except ValueError:
                return 400, [], b"policy must be JSON\n", False
            if not isinstance(policy, dict):
                return 400, [], b"policy must be a JSON object\n", False
            self.policies.append((gateway_id, policy))
            return 204, [], b"", False
        return 404 if method in ("GET", "POST") else 405, [], b"no such route\n", False

    async def _send(
        self, connection: h11.Connection, stream: RewindableStream, status: int,
        headers: list[tuple[str, str]], body: bytes, *, stall: bool,
    ) -> None:  # fmt: skip
        all_headers = [*headers, ("content-length", str(len(body)))]
        await stream.send_all(connection.send(h11.Response(status_code=status,
                                                           headers=all_headers)))  # fmt: skip
        if stall:
            await stream.send_all(connection.send(h11.Data(data=body[: len(body) // 2])))
            await trio.sleep_forever()
        if body:
            await stream.send_all(connection.send(h11.Data(data=body)))
        await stream.send_all(connection.send(h11.EndOfMessage()))
