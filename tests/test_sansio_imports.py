"""The sans-I/O core imports no Trio (DESIGN.md, "Layering").

Each module is imported in a fresh interpreter. ``import trio_relay._x`` would first run
``trio_relay/__init__.py``, which imports the Trio shell, so the child installs a stub
``trio_relay`` package (a bare module whose ``__path__`` is the source directory) before
importing: submodules and their relative imports then load from the real files, and
``__init__`` never runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import trio_relay

PACKAGE_DIR = Path(trio_relay.__file__).resolve().parent

SANS_IO = [
    "_url",
    "_token",
    "_frames",
    "_codec",
    "_close",
    "_backoff",
    "_outcome",
    "_descriptor",
    "_event",
    "_passthrough",
    "_keepalive",
]
if (PACKAGE_DIR / "_dedupe.py").exists():
    SANS_IO.append("_dedupe")

# Modules whose presence means I/O machinery came along.
FORBIDDEN = ("trio", "trio_websocket", "httpx", "httpcore", "anyio", "asyncio")

_CHILD = r"""
import importlib, json, sys, types

package_dir, module = sys.argv[1], sys.argv[2]
preloaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden})
stub = types.ModuleType("trio_relay")
stub.__path__ = [package_dir]
sys.modules["trio_relay"] = stub
loaded = importlib.import_module("trio_relay." + module)
print(json.dumps({{
    "preloaded": preloaded,
    "file": loaded.__file__,
    "stub_kept": sys.modules["trio_relay"] is stub,
    "modules": sorted(sys.modules),
}}))
"""


def _import_in_child(module: str) -> dict[str, object]:
    code = _CHILD.format(forbidden=repr(set(FORBIDDEN)))
    # -I: ignore PYTHONPATH and the user site, so only the venv and the stub are seen.
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code, str(PACKAGE_DIR), module],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def _io_modules(result: dict[str, object]) -> list[str]:
    modules = result["modules"]
    assert isinstance(modules, list)
    return [m for m in modules if m.split(".")[0] in FORBIDDEN]


@pytest.mark.parametrize("module", SANS_IO)
def test_sans_io_module_imports_no_trio(module: str) -> None:
    result = _import_in_child(module)
    assert result["preloaded"] == [], "interpreter start-up already imported I/O modules"
    assert result["stub_kept"], "trio_relay/__init__.py ran; the check would be meaningless"
    assert Path(str(result["file"])) == PACKAGE_DIR / f"{module}.py"
    assert _io_modules(result) == []


def test_the_check_detects_a_trio_import() -> None:
    # The harness must be able to fail: _outbox is Trio shell code.
    assert (PACKAGE_DIR / "_outbox.py").exists()
    assert "trio" in _io_modules(_import_in_child("_outbox"))
