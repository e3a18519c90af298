"""The edge tier's fixtures: real fronts and proxies (see edge_servers.py), each stopped
by its pid when the test ends, and a client TLS context trusting the tier's CA."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from edge_servers import Edge, TlsFiles, tls_files

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_machine_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own proxy variables must not capture the tier's loopback traffic;
    each test sets the ones it is about."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="session")
def ipv6_loopback() -> str:
    """``::1``, or a skip when this machine has no IPv6 loopback (some containers):
    a property of the machine, not a missing package, so it skips even in CI."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine: {exc}")
    return "::1"


@pytest.fixture(scope="session")
def edge_tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return tls_files(tmp_path_factory.mktemp("edge-tls"))


@pytest.fixture
def client_context(edge_tls: TlsFiles) -> ssl.SSLContext:
    """Verifies certificates and host names, trusting the tier's CA only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    edge_tls.ca.configure_trust(context)
    return context


@pytest.fixture
def edge(tmp_path: Path, edge_tls: TlsFiles) -> Iterator[Edge]:
    started = Edge(tmp_path, edge_tls)
    try:
        yield started
    finally:
        started.stop_all()
