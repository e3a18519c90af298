"""The tier's own switch: a missing server skips with the reason, and
``TRIO_RELAY_REQUIRE_EDGE=1`` (CI) turns that skip into a failure."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from edge_servers import REQUIRE_EDGE_ENV
from skip_reasons import run_probe as run_suite_probe

pytestmark = pytest.mark.edge

HERE = Path(__file__).resolve().parent
# Async, under pytest-trio in trio mode, as the tier's own tests run: a skip raised
# there once lost its reason (see tests/skip_reasons.py).
PROBE = """
from edge_servers import find_binary

async def test_needs_a_missing_server():
    find_binary("no-such-edge-server")
"""


def run_probe(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_EDGE_ENV}
    if require is not None:
        env[REQUIRE_EDGE_ENV] = require
    return run_suite_probe(tmp_path, PROBE, env=env, path=[HERE])


def test_a_missing_server_skips_with_the_reason(tmp_path: Path) -> None:
    done = run_probe(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    # The reason, at the line that skipped (not "_pytest/python.py:187: Skipped").
    assert re.search(r"edge_servers\.py:\d+: no-such-edge-server is not installed", done.stdout)


def test_required_the_missing_server_fails(tmp_path: Path) -> None:
    done = run_probe(tmp_path, "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert f"the edge tier is required ({REQUIRE_EDGE_ENV}=1)" in done.stdout
