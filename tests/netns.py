"""A peer in a network namespace that can vanish without a FIN or RST.

Kernel-level faults cannot be faked on loopback: a closed or killed peer always answers
with FIN or RST there. So the peer lives in its own network namespace, joined to ours by a
veth pair::

    test process (root namespace)            server subprocess (namespace NS)
    host_device  10.231.X.Y+1/30  <-- veth -->  peer_device  10.231.X.Y+2/30

and :meth:`NetnsHost.vanish` puts a ``blackhole`` qdisc on the egress of both ends: every
packet in either direction is dropped, carriers stay up, and neither side gets a FIN, RST
or ICMP error, which is what a powered-off peer or a NAT that forgot the flow looks like.
(``blackhole`` is built into any kernel with traffic control; ``netem`` often is not.)

Usage (needs root and ``ip``; the ``netns_host`` fixture in conftest.py turns
:class:`NetnsUnavailable` into a skip)::

    async with open_netns_host() as host:
        server = await host.run_python(SERVER_CODE, "--port", "8000")
        port = int(await server.readline())       # e.g. the server prints its port
        ...connect to host.address...
        await host.vanish()

Leaving the block kills every process started in the namespace and deletes the veth pair
and the namespace, also when the body fails or is cancelled.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

__all__ = ["NetnsError", "NetnsHost", "NetnsProcess", "NetnsUnavailable", "open_netns_host"]

# 10.231.0.0/16 is carved into /30s (4 addresses: network, our end, peer end, broadcast).
_SUPERNET = ipaddress.IPv4Network("10.231.0.0/16")
_SUBNETS = 1 << (30 - _SUPERNET.prefixlen)
_uses = itertools.count()


class NetnsUnavailable(Exception):
    """Network namespaces cannot be used here (not root, no ``ip``, no netns support)."""


class NetnsError(Exception):
    """An ``ip``/``tc`` command failed while the namespace was being built or changed."""


class NetnsProcess:
    """A subprocess running inside the namespace, with line access to its stdout.

    stderr is inherited, so a crashing server's traceback shows up in pytest's output.
    """

    def __init__(self, process: trio.Process, argv: Sequence[str]) -> None:
        self.process = process
        self.argv = list(argv)
        self._buffer = bytearray()
        self._name = " ".join(argv)[:120]

    async def readline(self, timeout: float = 10) -> str:
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
    """One namespace with a veth link to ours. Build it with :func:`open_netns_host`."""

    def __init__(self, index: int) -> None:
        subnet = _subnet(index)
        self.prefix = subnet.prefixlen
        self.local_address = str(subnet[1])
        """Our end, in the root namespace (the test process's source address)."""
        self.address = str(subnet[2])
        """The peer's end, inside the namespace: servers started here listen on it."""
        # Interface names must be shorter than 16 bytes; the index keeps them unique.
        self.host_device = f"trr{index}h"
        self.peer_device = f"trr{index}p"
        self.namespace = f"trio-relay-{os.getpid()}-{index}"
        self._processes: list[NetnsProcess] = []
        self._namespace_created = False
        self._link_created = False

    async def run_python(self, code: str, *args: str) -> NetnsProcess:
        """Start ``python -c code args...`` (this interpreter, unbuffered) in the namespace."""
        return await self.run(sys.executable, "-u", "-c", code, *args)

    async def run(self, *argv: str) -> NetnsProcess:
        """Start any command in the namespace; it is killed when the host is torn down."""
        full = ["ip", "netns", "exec", self.namespace, *argv]
        process = await trio.lowlevel.open_process(
            full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        )
        started = NetnsProcess(process, full)
        self._processes.append(started)
        return started

    async def vanish(self) -> None:
        """Make the peer go silent: drop every packet in both directions from now on.

        Established connections see no FIN, RST or ICMP; new connections get no answer.
        Processes in the namespace keep running (kill them: their FIN is dropped too).
        """
        await _ip("tc", "qdisc", "replace", "dev", self.host_device, "root", "blackhole")
        await self._in_ns("tc", "qdisc", "replace", "dev", self.peer_device, "root", "blackhole")

    async def restore(self) -> None:
        """Undo :meth:`vanish`: the link carries packets again."""
        await _ip("tc", "qdisc", "del", "dev", self.host_device, "root")
        await self._in_ns("tc", "qdisc", "del", "dev", self.peer_device, "root")

    async def _in_ns(self, *argv: str) -> None:
        await _ip("ip", "netns", "exec", self.namespace, *argv)

    async def _create(self) -> None:
        try:
            await _ip("ip", "netns", "add", self.namespace)
        except NetnsError as exc:
            raise NetnsUnavailable(f"`ip netns add` failed: {exc}") from exc
        self._namespace_created = True
        await _ip(
            "ip", "link", "add", self.host_device, "type", "veth",
            "peer", "name", self.peer_device, "netns", self.namespace,
        )  # fmt: skip
        self._link_created = True
        await _ip("ip", "addr", "add", f"{self.local_address}/{self.prefix}",
                  "dev", self.host_device)  # fmt: skip
        await _ip("ip", "link", "set", self.host_device, "up")
        ns = ("ip", "-n", self.namespace)
        await _ip(*ns, "addr", "add", f"{self.address}/{self.prefix}", "dev", self.peer_device)
        await _ip(*ns, "link", "set", self.peer_device, "up")
        await _ip(*ns, "link", "set", "lo", "up")

    async def _destroy(self) -> None:
        """Kill processes, then delete the link and namespace. Safe to call repeatedly and
        after a half-finished :meth:`_create`; errors are ignored (nothing to delete)."""
        with trio.CancelScope(shield=True):
            for process in self._processes:
                await process.kill()
            self._processes.clear()
            # Only delete what we created: a name clash must not delete someone else's link.
            if self._link_created:
                # Deleting one end of a veth pair deletes both; deleting the namespace would
                # too, but only once no process holds the namespace any more.
                await _ip("ip", "link", "del", self.host_device, check=False)
                self._link_created = False
            if self._namespace_created:
                await _ip("ip", "netns", "del", self.namespace, check=False)
                self._namespace_created = False


@asynccontextmanager
async def open_netns_host() -> AsyncIterator[NetnsHost]:
    """Create a namespace peer, yield it, and tear everything down on exit.

    Raises :class:`NetnsUnavailable` (with the reason) when this machine cannot do it.
    """
    if os.geteuid() != 0:
        raise NetnsUnavailable("network namespaces need root (run the tests as root)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise NetnsUnavailable("`ip`/`tc` not found (install iproute2)")
    host = NetnsHost(await _free_subnet_index())
    try:
        await host._create()
        yield host
    finally:
        await host._destroy()


async def _free_subnet_index() -> int:
    # Start from the pid so concurrent test runs (e.g. pytest-xdist workers) pick different
    # subnets, and skip any subnet that already has an address on this machine.
    result = await trio.run_process(["ip", "-o", "-4", "addr", "show"], capture_stdout=True)
    in_use = result.stdout.decode()
    start = os.getpid() * 16 + next(_uses)
    for offset in range(_SUBNETS):
        index = (start + offset) % _SUBNETS
        if not any(f" {ip}/" in in_use for ip in _subnet(index)):
            return index
    raise NetnsUnavailable(f"no free /30 left in {_SUPERNET}")


def _subnet(index: int) -> ipaddress.IPv4Network:
    first = _SUPERNET.network_address + 4 * index
    return ipaddress.IPv4Network(f"{first}/30")


async def _ip(*argv: str, check: bool = True) -> None:
    result = await trio.run_process(list(argv), capture_stdout=True, capture_stderr=True,
                                    check=False)  # fmt: skip
    if check and result.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {result.stderr.decode().strip()}")
