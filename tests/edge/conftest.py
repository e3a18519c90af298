"""The edge tier's fixtures: real fronts and proxies (see edge_servers.py), each stopped
by its pid when the test ends, and a client TLS context trusting the tier's CA."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from edge_servers import (
    ForwardProxy,
    Haproxy,
    Nginx,
    NginxSettings,
    TlsFiles,
    start_proxy,
    tls_files,
)

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_machine_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own proxy variables must not capture the tier's loopback traffic;
    each test sets the ones it is about."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="session")
def edge_tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return tls_files(tmp_path_factory.mktemp("edge-tls"))


@pytest.fixture
def client_context(edge_tls: TlsFiles) -> ssl.SSLContext:
    """Verifies certificates and host names, trusting the tier's CA only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    edge_tls.ca.configure_trust(context)
    return context


@dataclass
class Edge:
    """Starts the tier's servers for one test; :meth:`stop_all` ends them by pid."""

    root: Path
    tls: TlsFiles
    running: list[Nginx | Haproxy | ForwardProxy] = field(default_factory=list)

    def _dir(self, name: str) -> Path:
        path = self.root / f"{name}-{len(self.running)}"
        path.mkdir()
        return path

    def nginx(self, settings: NginxSettings, *, tls: bool = True, host: str = "127.0.0.1") -> Nginx:
        server = Nginx(self._dir("nginx"), self.tls if tls else None, settings, host)
        self.running.append(server)
        return server.start()

    def haproxy(self, upstream_port: int, *, tunnel_timeout: float = 60.0) -> Haproxy:
        server = Haproxy(self._dir("haproxy"), self.tls, upstream_port, tunnel_timeout)
        self.running.append(server)
        return server.start()

    def proxy(
        self, kind: str, *, host: str = "127.0.0.1", credentials: tuple[str, str] | None = None
    ) -> ForwardProxy:
        server = start_proxy(kind, self._dir(kind), host=host, credentials=credentials)
        self.running.append(server)
        return server

    def stop_all(self) -> None:
        for server in reversed(self.running):
            server.stop()


@pytest.fixture
def edge(tmp_path: Path, edge_tls: TlsFiles) -> Iterator[Edge]:
    started = Edge(tmp_path, edge_tls)
    try:
        yield started
    finally:
        started.stop_all()
