"""A peer behind a veth pair in its own network namespace, whose link can be made dead.

The same design as the test suite's ``tests/netns.py``, synchronous because the
benchmarks drive it between and inside rounds of two different event loops::

    our namespace                              namespace NS
    host_device 10.232.X.Y+1/30 <-- veth -->  peer_device 10.232.X.Y+2/30

:meth:`NetnsHost.vanish` puts a ``blackhole`` qdisc on the egress of both ends: every
packet in either direction is dropped, carriers stay up, and neither side sees a FIN,
RST or ICMP error: a powered-off peer, or a NAT that forgot the flow. Needs root and
iproute2; :func:`unavailable` says why not, when not.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["NetnsHost", "open_host", "unavailable"]

# A different /16 from the test suite's, so a benchmark and the tests can run at once.
_SUPERNET = ipaddress.IPv4Network("10.232.0.0/16")


def _ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(argv, capture_output=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {result.stderr.decode().strip()}")
    return result


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "`ip`/`tc` not found (install iproute2)"
    probe = f"trio-relay-bench-probe-{os.getpid()}"
    result = _ip("ip", "netns", "add", probe, check=False)
    if result.returncode != 0:
        return f"`ip netns add` failed: {result.stderr.decode().strip()}"
    _ip("ip", "netns", "del", probe, check=False)
    return None


class NetnsHost:
    def __init__(self, index: int) -> None:
        subnet = ipaddress.IPv4Network(f"{_SUPERNET.network_address + 4 * index}/30")
        self.prefix = subnet.prefixlen
        self.local_address = str(subnet[1])
        self.address = str(subnet[2])
        """The peer's end: a connector started with :attr:`exec_prefix` listens here."""
        self.host_device = f"trb{index}h"
        self.peer_device = f"trb{index}p"
        self.namespace = f"trio-relay-bench-{os.getpid()}-{index}"
        self.exec_prefix = ("ip", "netns", "exec", self.namespace)
        self._created: list[str] = []

    def create(self) -> None:
        _ip("ip", "netns", "add", self.namespace)
        self._created.append("netns")
        _ip(
            "ip",
            "link",
            "add",
            self.host_device,
            "type",
            "veth",
            "peer",
            "name",
            self.peer_device,
            "netns",
            self.namespace,
        )
        self._created.append("link")
        _ip("ip", "addr", "add", f"{self.local_address}/{self.prefix}", "dev", self.host_device)
        _ip("ip", "link", "set", self.host_device, "up")
        ns = ("ip", "-n", self.namespace)
        _ip(*ns, "addr", "add", f"{self.address}/{self.prefix}", "dev", self.peer_device)
        _ip(*ns, "link", "set", self.peer_device, "up")
        _ip(*ns, "link", "set", "lo", "up")

    def destroy(self) -> None:
        if "link" in self._created:
            _ip("ip", "link", "del", self.host_device, check=False)
        if "netns" in self._created:
            _ip("ip", "netns", "del", self.namespace, check=False)
        self._created.clear()

    def vanish(self) -> float:
        """Drop every packet both ways from now on; returns the monotonic time at which
        both ends were cut."""
        _ip("tc", "qdisc", "replace", "dev", self.host_device, "root", "blackhole")
        _ip(
            *self.exec_prefix,
            "tc",
            "qdisc",
            "replace",
            "dev",
            self.peer_device,
            "root",
            "blackhole",
        )
        return time.monotonic()

    def restore(self) -> None:
        _ip("tc", "qdisc", "del", "dev", self.host_device, "root", check=False)
        _ip(*self.exec_prefix, "tc", "qdisc", "del", "dev", self.peer_device, "root", check=False)


def _free_index() -> int:
    in_use = _ip("ip", "-o", "-4", "addr", "show").stdout.decode()
    subnets = 1 << (30 - _SUPERNET.prefixlen)
    start = os.getpid() % subnets
    for offset in range(subnets):
        index = (start + offset) % subnets
        first = _SUPERNET.network_address + 4 * index
        if not any(f" {first + i}/" in in_use for i in range(4)):
            return index
    raise RuntimeError(f"no free /30 left in {_SUPERNET}")


@contextmanager
def open_host() -> Iterator[NetnsHost]:
    host = NetnsHost(_free_index())
    try:
        host.create()
        yield host
    finally:
        host.destroy()
