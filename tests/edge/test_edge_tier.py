"""The tier's own switch: a missing server skips with the reason, and
``TRIO_RELAY_REQUIRE_EDGE=1`` (CI) turns that skip into a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from edge_servers import REQUIRE_EDGE_ENV

pytestmark = pytest.mark.edge

HERE = Path(__file__).resolve().parent
PROBE = """
from edge_servers import find_binary

def test_needs_a_missing_server():
    find_binary("no-such-edge-server")
"""


def run_probe(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_EDGE_ENV}
    if require is not None:
        env[REQUIRE_EDGE_ENV] = require
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "-p", "no:trio", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip


def test_a_missing_server_skips_with_the_reason(tmp_path: Path) -> None:
    done = run_probe(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "no-such-edge-server is not installed" in done.stdout


def test_required_the_missing_server_fails(tmp_path: Path) -> None:
    done = run_probe(tmp_path, "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert f"the edge tier is required ({REQUIRE_EDGE_ENV}=1)" in done.stdout
