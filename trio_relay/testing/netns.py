"""A peer in a network namespace that can vanish without a FIN or RST.

Kernel-level faults cannot be faked on loopback: a closed or killed peer always answers
with FIN or RST there. So the peer lives in its own network namespace, joined to ours by a
veth pair::

    this process (root namespace)             processes in namespace NS
    host_device  10.231.X.Y+1/30  <-- veth -->  peer_device  10.231.X.Y+2/30

and [`NetnsHost.vanish`][trio_relay.testing.netns.NetnsHost.vanish] puts a ``blackhole`` qdisc on
the egress of both ends: every
packet in either direction is dropped, carriers stay up, and neither side gets a FIN, RST
or ICMP error, which is what a powered-off peer or a NAT that forgot the flow looks like.
(``blackhole`` is built into any kernel with traffic control; ``netem`` often is not.)

Needs root and iproute2 (``ip``, ``tc``); [`unavailable`][trio_relay.testing.netns.unavailable]
says why not, when not.
The one harness serves two kinds of caller:

- **Trio code (the tests)**: ``async with open_netns_host() as host``, then
  ``await host.run_python(code, *args)`` to start a server in the namespace,
  ``await host.vanish()`` / ``await host.restore()``;
- **synchronous code (the benchmarks, which drive it between and inside rounds of two
  different event loops)**: ``with netns_host() as host``, ``host.exec_prefix`` to start
  a process there, ``host.vanish_sync()`` (returns the ``time.monotonic()`` of the cut) /
  ``host.restore_sync()``.

Leaving either block kills every process started through the host and deletes the veth
pair and the namespace, also when the body fails or is cancelled.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager

import trio

__all__ = [
    "NetnsError",
    "NetnsHost",
    "NetnsProcess",
    "NetnsUnavailable",
    "netns_host",
    "open_netns_host",
    "unavailable",
]

# 10.231.0.0/16 is carved into /30s (4 addresses: network, our end, peer end, broadcast).
_SUPERNET = ipaddress.IPv4Network("10.231.0.0/16")
_SUBNETS = 1 << (30 - _SUPERNET.prefixlen)
_ATTEMPTS = 8
"""Subnets tried in turn when another process took the one we picked meanwhile."""
_uses = itertools.count()


class NetnsUnavailable(Exception):
    """Network namespaces cannot be used here (not root, no ``ip``, no netns support)."""


class NetnsError(Exception):
    """An ``ip``/``tc`` command failed while the namespace was being built or changed."""


def _ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(argv, capture_output=True, check=False)
    if check and result.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {result.stderr.decode().strip()}")
    return result


def unavailable(*, probe: bool = False, euid: int | None = None) -> str | None:
    """Why network namespaces cannot be used here, or None when they can. ``probe``:
    also create and delete a namespace (some containers refuse ``ip netns add``).
    ``euid``: judge for this effective user id instead of the process's own, so a test
    running as root can see what a user without root is told."""
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else None
    if euid != 0:
        return "network namespaces need root (run as root)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "`ip`/`tc` not found (install iproute2)"
    if probe:
        name = f"trio-relay-probe-{os.getpid()}"
        result = _ip("ip", "netns", "add", name, check=False)
        if result.returncode != 0:
            return f"`ip netns add` failed: {result.stderr.decode().strip()}"
        _ip("ip", "netns", "del", name, check=False)
    return None


class NetnsProcess:
    """A subprocess running inside the namespace, with line access to its stdout.

    stderr is inherited, so a crashing server's traceback shows up in the output.
    """

    def __init__(self, process: trio.Process, argv: Sequence[str]) -> None:
        self.process = process
        self.argv = list(argv)
        self._buffer = bytearray()
        self._name = " ".join(argv)[:120]

    # ASYNC109: a server that never gets ready is reported with its output, not cancelled silently.
    async def readline(self, timeout: float = 10) -> str:  # noqa: ASYNC109
        """The next stdout line, without its newline. Raises if the process ends or stays
        quiet for ``timeout`` seconds (a server that never got ready)."""
        assert self.process.stdout is not None
        with trio.move_on_after(timeout):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some()
                if not chunk:
                    code = await self.process.wait()
                    raise NetnsError(f"{self._name} exited with {code} before printing a line")
                self._buffer += chunk
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer[:] = rest
            return line.decode()
        raise NetnsError(f"{self._name} printed no line within {timeout} s")

    async def kill(self) -> None:
        """Kill the process and reap it (idempotent)."""
        if self.process.returncode is None:
            self.process.kill()
        with trio.CancelScope(shield=True):
            await self.process.wait()
            if self.process.stdout is not None:
                await self.process.stdout.aclose()


class NetnsHost:
    """One namespace with a veth link to ours. Build it with
    [`open_netns_host`][trio_relay.testing.netns.open_netns_host]
    (Trio) or [`netns_host`][trio_relay.testing.netns.netns_host] (synchronous)."""

    def __init__(self, index: int) -> None:
        subnet = _subnet(index)
        self.prefix = subnet.prefixlen
        self.local_address = str(subnet[1])
        """Our end, in the root namespace (this process's source address)."""
        self.address = str(subnet[2])
        """The peer's end, inside the namespace: servers started here listen on it."""
        # Interface names must be shorter than 16 bytes; the index keeps them unique.
        self.host_device = f"trr{index}h"
        self.peer_device = f"trr{index}p"
        self.namespace = f"trio-relay-{os.getpid()}-{index}"
        self.exec_prefix = ("ip", "netns", "exec", self.namespace)
        """Prefix a command with this to run it in the namespace."""
        self._processes: list[NetnsProcess] = []
        self._namespace_created = False
        self._link_created = False

    # --- processes (Trio) --------------------------------------------------------------

    async def run_python(self, code: str, *args: str) -> NetnsProcess:
        """Start ``python -c code args...`` (this interpreter, unbuffered) in the namespace."""
        return await self.run(sys.executable, "-u", "-c", code, *args)

    async def run(self, *argv: str) -> NetnsProcess:
        """Start any command in the namespace; it is killed when the host is torn down."""
        full = [*self.exec_prefix, *argv]
        process = await trio.lowlevel.open_process(
            full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        )
        started = NetnsProcess(process, full)
        self._processes.append(started)
        return started

    # --- the link ----------------------------------------------------------------------

    def vanish_sync(self) -> float:
        """Drop every packet in both directions from now on; returns the monotonic time
        at which both ends were cut. Established connections see no FIN, RST or ICMP;
        new connections get no answer. Processes in the namespace keep running."""
        _ip("tc", "qdisc", "replace", "dev", self.host_device, "root", "blackhole")
        _ip(*self.exec_prefix, "tc", "qdisc", "replace", "dev", self.peer_device,
            "root", "blackhole")  # fmt: skip
        return time.monotonic()

    def restore_sync(self) -> None:
        """Undo [`vanish_sync`][trio_relay.testing.netns.NetnsHost.vanish_sync]: the link carries
        packets again (idempotent)."""
        _ip("tc", "qdisc", "del", "dev", self.host_device, "root", check=False)
        _ip(*self.exec_prefix, "tc", "qdisc", "del", "dev", self.peer_device, "root",
            check=False)  # fmt: skip

    async def vanish(self) -> None:
        """[`vanish_sync`][trio_relay.testing.netns.NetnsHost.vanish_sync] from Trio code (in a
        worker thread)."""
        await trio.to_thread.run_sync(self.vanish_sync)

    async def restore(self) -> None:
        """[`restore_sync`][trio_relay.testing.netns.NetnsHost.restore_sync] from Trio code (in a
        worker thread)."""
        await trio.to_thread.run_sync(self.restore_sync)

    # --- building and tearing down -----------------------------------------------------

    def create(self) -> None:
        try:
            _ip("ip", "netns", "add", self.namespace)
        except NetnsError as exc:
            raise NetnsUnavailable(f"`ip netns add` failed: {exc}") from exc
        self._namespace_created = True
        _ip("ip", "link", "add", self.host_device, "type", "veth",
            "peer", "name", self.peer_device, "netns", self.namespace)  # fmt: skip
        self._link_created = True
        _ip("ip", "addr", "add", f"{self.local_address}/{self.prefix}", "dev", self.host_device)
        _ip("ip", "link", "set", self.host_device, "up")
        ns = ("ip", "-n", self.namespace)
        _ip(*ns, "addr", "add", f"{self.address}/{self.prefix}", "dev", self.peer_device)
        _ip(*ns, "link", "set", self.peer_device, "up")
        _ip(*ns, "link", "set", "lo", "up")

    def destroy(self) -> None:
        """Delete the link and the namespace. Safe to call repeatedly and after a
        half-finished [`create`][trio_relay.testing.netns.NetnsHost.create]; only what this host
        created is deleted (a name clash
        must not delete someone else's link)."""
        if self._link_created:
            # Deleting one end of a veth pair deletes both.
            _ip("ip", "link", "del", self.host_device, check=False)
            self._link_created = False
        if self._namespace_created:
            _ip("ip", "netns", "del", self.namespace, check=False)
            self._namespace_created = False

    async def _kill_processes(self) -> None:
        with trio.CancelScope(shield=True):
            for process in self._processes:
                await process.kill()
            self._processes.clear()


def _build(euid: int | None) -> NetnsHost:
    """A created host on a free subnet; the next subnets are tried when another process
    took the one picked (both saw it free)."""
    reason = unavailable(euid=euid)
    if reason is not None:
        raise NetnsUnavailable(reason)
    in_use = _ip("ip", "-o", "-4", "addr", "show").stdout.decode()
    start = os.getpid() * 16 + next(_uses)
    error: NetnsError | None = None
    tried = 0
    for offset in range(_SUBNETS):
        index = (start + offset) % _SUBNETS
        if any(f" {ip}/" in in_use for ip in _subnet(index)):
            continue
        host = NetnsHost(index)
        try:
            host.create()
            return host
        except NetnsUnavailable:
            host.destroy()
            raise
        except NetnsError as exc:
            host.destroy()
            error = exc
            tried += 1
            if tried >= _ATTEMPTS:
                break
    raise NetnsUnavailable(f"no free /30 in {_SUPERNET} could be set up: {error}")


@asynccontextmanager
async def open_netns_host(*, euid: int | None = None) -> AsyncIterator[NetnsHost]:
    """Create a namespace peer, yield it, and tear everything down on exit (Trio).

    Raises [`NetnsUnavailable`][trio_relay.testing.netns.NetnsUnavailable] (with the reason) when
    this machine cannot do it;
    ``euid`` is passed to [`unavailable`][trio_relay.testing.netns.unavailable] (None: this
    process's own).
    """
    host = await trio.to_thread.run_sync(_build, euid)
    try:
        yield host
    finally:
        await host._kill_processes()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(host.destroy)


@contextmanager
def netns_host(*, euid: int | None = None) -> Iterator[NetnsHost]:
    """[`open_netns_host`][trio_relay.testing.netns.open_netns_host] for synchronous callers; start
    processes in it with
    [`NetnsHost.exec_prefix`][trio_relay.testing.netns.NetnsHost.exec_prefix] (they are the
    caller's to stop)."""
    host = _build(euid)
    try:
        yield host
    finally:
        host.restore_sync()
        host.destroy()


def _subnet(index: int) -> ipaddress.IPv4Network:
    first = _SUPERNET.network_address + 4 * index
    return ipaddress.IPv4Network(f"{first}/30")
