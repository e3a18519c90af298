"""Every skip says why under the suite's real plugin set: pytest-trio in trio mode.

pytest-trio re-raises a skip from an async test or fixture without its reason, so the
README's "skip with the reason" printed ``_pytest/python.py:187: Skipped`` for each of
them; ``skip_reasons.py`` (loaded by ``conftest.py``) puts the reason back.
"""

from __future__ import annotations

import os
from pathlib import Path

from skip_reasons import run_probe

PROBE = """
import pytest


@pytest.fixture
async def server():
    pytest.skip("redis-server is not installed (apt-get install redis-server)")
    yield


async def test_skipped_in_the_test():
    pytest.skip("network namespaces unavailable: not root")


async def test_skipped_in_an_async_fixture(server):
    pass


def test_skipped_in_a_sync_test():
    pytest.skip("no /proc/self/fd")
"""


def test_each_skip_shows_its_reason_and_the_line_that_skipped(tmp_path: Path) -> None:
    done = run_probe(tmp_path, PROBE, env=os.environ)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 skipped" in done.stdout
    skipped = sorted(line for line in done.stdout.splitlines() if line.startswith("SKIPPED"))
    assert skipped == [
        "SKIPPED [1] test_probe.py:12: network namespaces unavailable: not root",
        "SKIPPED [1] test_probe.py:20: no /proc/self/fd",
        "SKIPPED [1] test_probe.py:7: redis-server is not installed "
        "(apt-get install redis-server)",
    ]
