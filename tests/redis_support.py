"""A real ``redis-server`` for the tests: started on a free loopback port in a
temporary directory, stopped (and restartable) by the test that owns it.

No mock and no fakeredis. Where ``redis-server`` is not installed the Redis tests skip
with that reason, unless ``TRIO_RELAY_REQUIRE_REDIS=1`` (set by ``.ci/run``), where a
missing server fails them instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

REDIS_SERVER = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; ``url`` stays the same across :meth:`restart`."""

    def __init__(self, directory: Path, password: str | None = None, tls: bool = False) -> None:
        assert REDIS_SERVER is not None
        self.directory = directory
        self.port = _free_port()
        self.password = password
        self.tls = tls
        if tls:  # a CA of our own (trustme) and a certificate for 127.0.0.1
            import trustme

            ca = trustme.CA()
            cert = ca.issue_cert("127.0.0.1")
            ca.cert_pem.write_to_path(str(directory / "ca.pem"))
            cert.private_key_pem.write_to_path(str(directory / "key.pem"))
            cert.cert_chain_pems[0].write_to_path(str(directory / "cert.pem"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        # Percent-encoded, as a URL must carry it (the store decodes it).
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        if self.tls:
            ca = quote(str(self.directory / "ca.pem"), safe="")
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={ca}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def cli(self) -> list[str]:
        """The ``redis-cli`` command line that talks to this server (plain, no TLS)."""
        assert not self.tls, "cli() speaks plain TCP"
        auth = [] if self.password is None else ["-a", self.password, "--no-auth-warning"]
        return [shutil.which("redis-cli") or "redis-cli", "-p", str(self.port), *auth]

    def start(self) -> None:
        assert REDIS_SERVER is not None and self.process is None
        d = self.directory
        listen = (
            ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(d / "cert.pem"),
             "--tls-key-file", str(d / "key.pem"), "--tls-ca-cert-file", str(d / "ca.pem"),
             "--tls-auth-clients", "no"]
            if self.tls else ["--port", str(self.port)]
        )
        args = [
            REDIS_SERVER, *listen, "--bind", "127.0.0.1",
            "--dir", str(self.directory), "--save", "", "--appendonly", "no",
            "--protected-mode", "no",
        ]
        if self.password is not None:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    if self.tls:
                        return  # listening; the handshake is the client's business
                    s.sendall(b"PING\r\n")
                    if s.recv(64):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _require() -> None:
    if REDIS_SERVER is None:
        if os.environ.get("TRIO_RELAY_REQUIRE_REDIS") == "1":
            pytest.fail("TRIO_RELAY_REQUIRE_REDIS=1 but redis-server is not installed")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")


def _served(
    tmp_path: Path, password: str | None = None, tls: bool = False
) -> Iterator[RedisServer]:
    _require()
    server = RedisServer(tmp_path, password=password, tls=tls)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from _served(tmp_path)


@pytest.fixture
def redis_server_tls(tmp_path: Path) -> Iterator[RedisServer]:
    yield from _served(tmp_path, password="tls-pw", tls=True)


@pytest.fixture
def redis_server_with_password(tmp_path: Path) -> Iterator[RedisServer]:
    yield from _served(tmp_path, password="s3cr:t/p@ss")
