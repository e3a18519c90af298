"""Servers on 127.0.0.1 for the HTTP tests, each on another stack than the client
(stdlib ``http.server``/``socketserver`` in threads), so the blocking clients can be
tested too: an origin (plain text and an SSE stream), a forward proxy that records what
it relayed, and read-back of the TCP options on the client's connected socket.
"""

from __future__ import annotations

import contextlib
import http.server
import select
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import trustme

TCP = socket.IPPROTO_TCP
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def keepalive_options(sock: Any) -> dict[str, int]:
    return {
        "keepalive": int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0),
        "idle": sock.getsockopt(TCP, socket.TCP_KEEPIDLE),
        "interval": sock.getsockopt(TCP, socket.TCP_KEEPINTVL),
        "count": sock.getsockopt(TCP, socket.TCP_KEEPCNT),
        "user_timeout": sock.getsockopt(TCP, socket.TCP_USER_TIMEOUT),
    }


def client_socket(response: Any) -> Any:
    """The client side socket an httpx or httpx2 response arrived on."""
    return response.extensions["network_stream"].get_extra_info("socket")


def tls_pair() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for 127.0.0.1."""
    ca = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


# --- a tiny origin server ----------------------------------------------------------------

SSE_EVENTS = 200


class OriginHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/sse":
            self._stream_events()
            return
        body = f"hello {self.headers.get('x-test', '-')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for number in range(SSE_EVENTS):
            event = f"data: {number}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            if number % 50 == 0:
                self.wfile.flush()
                time.sleep(0.005)  # let some chunks arrive on their own
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_origin(tls: ssl.SSLContext | None = None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OriginHandler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        scheme = "https" if tls else "http"
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- a tiny forward proxy (absolute-form GET and CONNECT) --------------------------------


class ProxyHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.request.recv(65536)
            if not data:
                return
            head += data
        request_line, rest = head.split(b"\r\n", 1)
        method, target, version = request_line.decode().split(" ")
        self.server.seen.append(f"{method} {target}")  # type: ignore[attr-defined]
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            url = urlsplit(target)
            upstream = socket.create_connection((url.hostname, url.port or 80))
            path = url.path + (f"?{url.query}" if url.query else "")
            upstream.sendall(f"{method} {path} {version}\r\n".encode() + rest)
        with upstream:
            _pipe(self.request, upstream)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 5)
        if not readable:
            return
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@contextlib.contextmanager
def serve_proxy() -> Iterator[tuple[str, list[str]]]:
    """Yields the proxy URL and the list of request lines it has seen."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ProxyHandler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
