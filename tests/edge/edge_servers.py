"""Real fronts and proxies for the edge tier (issue 23): nginx and haproxy as TLS fronts,
squid and tinyproxy as HTTP CONNECT proxies, microsocks as a SOCKS5 proxy.

Each one is started from a config generated into the test's temporary directory, on a
free loopback port, in the foreground, and stopped by its pid (SIGTERM, then SIGKILL
after a grace period). A missing binary skips the test with the reason, or fails it
when ``TRIO_RELAY_REQUIRE_EDGE=1`` (CI), as for the netns and Redis tiers.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
import trustme

from trio_relay import RelayConfig

REQUIRE_EDGE_ENV = "TRIO_RELAY_REQUIRE_EDGE"
"""Set to 1 (CI) to fail instead of skip when a server of the edge tier is missing."""

PACKAGES = {
    "nginx": "nginx",
    "haproxy": "haproxy",
    "squid": "squid",
    "tinyproxy": "tinyproxy",
    "microsocks": "microsocks",
    "openssl": "openssl",
}
"""Binary -> the Debian package that has it (what the skip reason tells you to install)."""


def unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_EDGE_ENV) == "1":
        pytest.fail(f"the edge tier is required ({REQUIRE_EDGE_ENV}=1) but {reason}")
    pytest.skip(reason)


def find_binary(name: str) -> str:
    """The path of ``name`` (PATH, then the sbin directories a non-root PATH lacks)."""
    found = shutil.which(name)
    for candidate in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/sbin/{name}"):
        if found is None and os.access(candidate, os.X_OK):
            found = candidate
    if found is None:
        unavailable(f"{name} is not installed (apt-get install {PACKAGES.get(name, name)})")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the server binds it a moment later; on loopback
    with ephemeral ports far from the range handed out here, that race is theoretical)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class EdgeProcess:
    """One server process of the tier, listening on ``host:port``."""

    name: str
    process: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.pid, sig)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, grace: float = 5.0) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait()


def launch(name: str, argv: list[str], host: str, port: int, workdir: Path) -> EdgeProcess:
    """Start ``argv`` and return once ``host:port`` accepts a connection."""
    log = workdir / f"{name}.out"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    server = EdgeProcess(name, process, host, port, log)
    deadline = time.monotonic() + 15
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"{name} exited with {process.returncode} before listening on "
                f"{netloc(host, port)}: {server.log_text()[-2000:]}"
            )
        try:
            socket.create_connection((host, port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(
                    f"{name} did not listen on {netloc(host, port)} within 15 s: "
                    f"{server.log_text()[-2000:]}"
                ) from None
            time.sleep(0.02)


@dataclass(frozen=True)
class TlsFiles:
    """A certificate for 127.0.0.1, ::1 and localhost from a throwaway CA, on disk."""

    ca: trustme.CA
    cert: Path
    key: Path
    combined: Path
    """Certificate chain and key in one file (haproxy's ``crt``)."""


def tls_files(directory: Path) -> TlsFiles:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "::1", "localhost")
    cert, key, combined = directory / "cert.pem", directory / "key.pem", directory / "both.pem"
    chain = b"".join(blob.bytes() for blob in issued.cert_chain_pems)
    cert.write_bytes(chain)
    key.write_bytes(issued.private_key_pem.bytes())
    combined.write_bytes(chain + issued.private_key_pem.bytes())
    return TlsFiles(ca, cert, key, combined)


def ms(seconds: float) -> str:
    """A duration as nginx and haproxy take it (whole milliseconds)."""
    return f"{round(seconds * 1000)}ms"


# --- nginx ------------------------------------------------------------------------------


@dataclass
class NginxSettings:
    upstream_port: int
    read_timeout: float = 60.0
    """``proxy_read_timeout``: how long nginx waits for the connector between two reads
    before it cuts the link (the idle cut of the tier's idle-cut scenarios)."""
    worker_shutdown_timeout: float = 2.0
    """How long an old worker keeps its WebSockets after a reload (SIGHUP)."""
    maintenance_retry_after: int | None = None
    """Answer every request 503 with this ``Retry-After`` (a maintenance page)."""


@dataclass
class Nginx:
    """nginx as a TLS front (or plain, ``tls=None``) in front of the connector."""

    workdir: Path
    tls: TlsFiles | None
    settings: NginxSettings
    host: str = "127.0.0.1"
    port: int = 0
    process: EdgeProcess | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{netloc(self.host, self.port)}"

    def _render(self) -> str:
        s, d = self.settings, self.workdir
        listen = f"listen {netloc(self.host, self.port)}{' ssl' if self.tls else ''};"
        tls = (
            f"ssl_certificate {self.tls.cert}; ssl_certificate_key {self.tls.key};"
            if self.tls
            else ""
        )
        if s.maintenance_retry_after is not None:
            location = (
                f"add_header Retry-After {s.maintenance_retry_after} always; return 503;"
            )
        else:
            # The WebSocket headers a front must pass (hop-by-hop, so nginx drops them
            # unless told), and no buffering: relay frames must not wait in nginx.
            location = f"""
                proxy_pass http://127.0.0.1:{s.upstream_port};
                proxy_http_version 1.1;
                proxy_set_header Upgrade $http_upgrade;
                proxy_set_header Connection $connection_upgrade;
                proxy_set_header Host $host;
                proxy_set_header X-Real-IP $remote_addr;
                proxy_buffering off;
                proxy_read_timeout {ms(s.read_timeout)};
                proxy_send_timeout {ms(s.read_timeout)};"""
        return f"""
            daemon off;
            master_process on;
            worker_processes 1;
            {"user root;" if os.geteuid() == 0 else ""}
            pid {d}/nginx.pid;
            error_log {d}/nginx-error.log info;
            worker_shutdown_timeout {ms(s.worker_shutdown_timeout)};
            events {{ worker_connections 512; }}
            http {{
                access_log off;
                client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;
                fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi;
                scgi_temp_path {d}/scgi;
                map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
                server {{
                    {listen}
                    {tls}
                    location / {{ {location} }}
                }}
            }}
        """

    def start(self) -> Nginx:
        binary = find_binary("nginx")
        self.port = self.port or free_port(self.host)
        conf = self.workdir / "nginx.conf"
        conf.write_text(self._render())
        argv = [binary, "-e", str(self.workdir / "nginx-error.log"), "-p", str(self.workdir),
                "-c", str(conf)]  # fmt: skip
        self.process = launch("nginx", argv, self.host, self.port, self.workdir)
        return self

    def reload(self, settings: NginxSettings) -> None:
        """Rewrite the config and reload gracefully (SIGHUP to the master): new workers
        take new connections, old ones finish theirs within worker_shutdown_timeout."""
        assert self.process is not None
        self.settings = settings
        (self.workdir / "nginx.conf").write_text(self._render())
        self.process.signal(signal.SIGHUP)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# --- haproxy ----------------------------------------------------------------------------


@dataclass
class Haproxy:
    """haproxy (master-worker, ``-W``) as a TLS front in front of the connector."""

    workdir: Path
    tls: TlsFiles
    upstream_port: int
    tunnel_timeout: float = 60.0
    """``timeout tunnel``: how long an upgraded connection may be idle (it replaces
    ``timeout client``/``server`` once the WebSocket is up)."""
    host: str = "127.0.0.1"
    port: int = 0
    process: EdgeProcess | None = None

    @property
    def url(self) -> str:
        return f"https://{netloc(self.host, self.port)}"

    def _render(self) -> str:
        return f"""
global
    pidfile {self.workdir}/haproxy.pid
    hard-stop-after 30s
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout tunnel {ms(self.tunnel_timeout)}
    timeout client-fin 1s
    retries 0
frontend front
    bind {netloc(self.host, self.port)} ssl crt {self.tls.combined}
    default_backend connector
backend connector
    server connector 127.0.0.1:{self.upstream_port}
"""

    def start(self) -> Haproxy:
        binary = find_binary("haproxy")
        self.port = self.port or free_port(self.host)
        conf = self.workdir / "haproxy.cfg"
        conf.write_text(self._render())
        argv = [binary, "-W", "-f", str(conf)]
        self.process = launch("haproxy", argv, self.host, self.port, self.workdir)
        return self

    def reload(self) -> None:
        """A graceful reload: SIGUSR2 to the master starts new workers; the old ones
        keep their established connections until those end (or hard-stop-after)."""
        assert self.process is not None
        self.process.signal(signal.SIGUSR2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# --- squid, tinyproxy -------------------------------------------------------------------


@dataclass
class ForwardProxy:
    """A running CONNECT proxy; ``url(user, password)`` is how a client names it."""

    kind: str
    host: str
    port: int
    process: EdgeProcess
    credentials: tuple[str, str] | None = field(default=None, repr=False)
    cleanup: Path | None = None
    """A directory of the proxy's own, removed when it stops."""

    def url(
        self, user: str | None = None, password: str | None = None, *, scheme: str = "http"
    ) -> str:
        userinfo = f"{user}:{password}@" if user is not None else ""
        return f"{scheme}://{userinfo}{netloc(self.host, self.port)}"

    def stop(self) -> None:
        self.process.stop(grace=0.5)  # squid lingers seconds over its shutdown otherwise
        if self.cleanup is not None:
            shutil.rmtree(self.cleanup, ignore_errors=True)


def _htpasswd(workdir: Path, user: str, password: str) -> Path:
    # squid's basic_ncsa_auth reads an htpasswd file; openssl makes the MD5-crypt hash
    # (Python's crypt module is deprecated and gone in 3.13).
    openssl = find_binary("openssl")
    hashed = subprocess.run(
        [openssl, "passwd", "-1", password], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = workdir / "passwd"
    path.write_text(f"{user}:{hashed}\n")
    path.chmod(0o644)
    return path


PROXY_SOURCE = "127.0.0.2"
"""The address an IPv4 proxy of the tier dials out from: the connector sees it as the
gateway's address, which shows the link went through the proxy (the relay's own dials
come from 127.0.0.1)."""


def outgoing(host: str, directive: str) -> str:
    return f"{directive} {PROXY_SOURCE}\n" if ":" not in host else ""


def start_squid(
    workdir: Path, *, host: str = "127.0.0.1", credentials: tuple[str, str] | None = None
) -> ForwardProxy:
    binary = find_binary("squid")
    port = free_port(host)
    workdir.chmod(0o777)  # squid drops to its own user and writes its log here
    if credentials is not None:
        # squid's helper runs as squid's own user, which cannot pass pytest's private
        # (0700) temporary directories: the password file lives in a readable one.
        readable = Path(tempfile.mkdtemp(prefix="trio-relay-squid-"))
        readable.chmod(0o755)
        passwd = _htpasswd(readable, *credentials)
        helper = next(
            (p for p in ("/usr/lib/squid/basic_ncsa_auth", "/usr/lib/squid3/basic_ncsa_auth")
             if os.access(p, os.X_OK)),
            None,
        )  # fmt: skip
        if helper is None:
            unavailable("squid's basic_ncsa_auth helper is not installed (apt-get install squid)")
        access = (
            f"auth_param basic program {helper} {passwd}\n"
            "auth_param basic realm edge\n"
            "acl authed proxy_auth REQUIRED\n"
            "http_access allow authed\n"
            "http_access deny all\n"
        )
    else:
        readable = None
        access = "http_access allow all\n"
    conf = workdir / "squid.conf"
    conf.write_text(
        f"http_port {netloc(host, port)}\n"
        "pid_filename none\n"
        f"cache_log {workdir}/squid-cache.log\n"
        "access_log none\n"
        "cache deny all\n"
        "cache_mem 8 MB\n"
        "shutdown_lifetime 0 seconds\n"
        f"coredump_dir {workdir}\n" + outgoing(host, "tcp_outgoing_address") + access
    )
    try:
        process = launch("squid", [binary, "-N", "-f", str(conf)], host, port, workdir)
    except BaseException:
        if readable is not None:
            shutil.rmtree(readable, ignore_errors=True)
        raise
    return ForwardProxy("squid", host, port, process, credentials, cleanup=readable)


def start_tinyproxy(
    workdir: Path, *, host: str = "127.0.0.1", credentials: tuple[str, str] | None = None
) -> ForwardProxy:
    binary = find_binary("tinyproxy")
    port = free_port(host)
    auth = f"BasicAuth {credentials[0]} {credentials[1]}\n" if credentials else ""
    conf = workdir / "tinyproxy.conf"
    conf.write_text(
        f"Port {port}\n"
        f"Listen {host}\n"
        # As root it must drop to a user of its own; otherwise it runs as ours.
        + ("User nobody\nGroup nogroup\n" if os.geteuid() == 0 else "")
        + "Timeout 600\n"
        "MaxClients 64\n"
        "LogLevel Warning\n" + outgoing(host, "Bind") + auth
    )
    process = launch("tinyproxy", [binary, "-d", "-c", str(conf)], host, port, workdir)
    return ForwardProxy("tinyproxy", host, port, process, credentials)


def start_proxy(
    kind: str, workdir: Path, *, host: str = "127.0.0.1",
    credentials: tuple[str, str] | None = None,
) -> ForwardProxy:  # fmt: skip
    start = {"squid": start_squid, "tinyproxy": start_tinyproxy, "microsocks": start_microsocks}[
        kind
    ]
    return start(workdir, host=host, credentials=credentials)


# --- microsocks -------------------------------------------------------------------------


def start_microsocks(
    workdir: Path, *, host: str = "127.0.0.1", credentials: tuple[str, str] | None = None
) -> ForwardProxy:
    """A SOCKS5 proxy; with ``credentials`` it takes RFC 1929 username/password only."""
    binary = find_binary("microsocks")
    port = free_port(host)
    argv = [binary, "-i", host, "-p", str(port)]
    if ":" not in host:
        argv += ["-b", PROXY_SOURCE]
    if credentials is not None:
        argv += ["-u", credentials[0], "-P", credentials[1]]
    process = launch("microsocks", argv, host, port, workdir)
    return ForwardProxy("microsocks", host, port, process, credentials)


# --- one test's servers ---------------------------------------------------------------


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


def quick(**overrides: Any) -> RelayConfig:
    """A config for the tier's relays: a short close (the servers answer at once)."""
    defaults: dict[str, Any] = {"close_timeout": 0.2}
    return RelayConfig(**(defaults | overrides))
