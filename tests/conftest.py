"""Shared fixtures. Each section belongs to one feature; append new sections below."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

# pytest-trio drops the reason of a skip raised in an async test or fixture; this hook
# puts it back, so every skip says why (see skip_reasons.py).
from skip_reasons import pytest_runtest_makereport  # noqa: F401

from trio_relay.cli import import_benchmarks
from trio_relay.testing.netns import NetnsHost, NetnsUnavailable, open_netns_host

# The benchmarks are a directory of the source tree, not an installed package: the tests
# of them import ``trio_relay_benchmarks`` the way ``trio-relay bench`` does.
import_benchmarks("run")

# ---------------------------------------------------------------------------------------
# Network namespaces (issue 3): a peer that can vanish without FIN or RST. See
# trio_relay/testing/netns.py (the one harness, shared with the benchmarks).
# ---------------------------------------------------------------------------------------

REQUIRE_NETNS_ENV = "TRIO_RELAY_REQUIRE_NETNS"
"""Set to 1 (e.g. in CI, which runs as root) to fail instead of skip when netns is missing."""


@pytest.fixture
async def netns_host() -> AsyncIterator[NetnsHost]:
    """A :class:`netns.NetnsHost`, torn down after the test; skips with the reason when
    network namespaces are unavailable (not root, no ``ip``, ``ip netns add`` refused)."""
    async with AsyncExitStack() as stack:
        try:
            host = await stack.enter_async_context(open_netns_host())
        except NetnsUnavailable as exc:
            if os.environ.get(REQUIRE_NETNS_ENV) == "1":
                pytest.fail(f"network namespaces required but unavailable: {exc}")
            pytest.skip(f"network namespaces unavailable: {exc}")
        yield host


# ---------------------------------------------------------------------------------------
# (end of the network-namespace section)
# ---------------------------------------------------------------------------------------
