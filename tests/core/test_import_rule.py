"""The sans-I/O core imports no Trio, no socket library and no HTTP client (DESIGN.md,
"Layering"). No hand-kept list: every module in ``trio_relay/_core/`` is checked, so a
new module is covered the moment it exists.

Two checks. The static one reads each module's import statements, so a forbidden import
behind an ``if`` or inside a function is caught too. The dynamic one imports the whole
core in a fresh interpreter, with ``trio_relay/__init__.py`` (which loads the shell)
kept out by a stub package, and looks at what came along transitively.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import trio_relay

PACKAGE_DIR = Path(trio_relay.__file__).resolve().parent
CORE_DIR = PACKAGE_DIR / "_core"
CORE_MODULES = sorted(p.stem for p in CORE_DIR.glob("*.py") if p.stem != "__init__")

FORBIDDEN = frozenset(
    {
        "trio",
        "trio_websocket",
        "wsproto",
        "websockets",
        "h11",
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "anyio",
        "asyncio",
        "coredis",
        "sniffio",
    }
)


def _imports(path: Path) -> list[tuple[str, int]]:
    """Top-level names a module imports, and relative imports resolved to the package."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.append((node.module, node.lineno))
            elif node.level >= 2:
                # ``from .._trio import x`` leaves the core.
                found.append((f"trio_relay.{node.module or ''}", node.lineno))
    return found


def test_the_core_folder_holds_the_pure_modules() -> None:
    # A guard against the walk finding nothing (a moved folder would pass vacuously).
    assert {"frames", "codec", "close", "backoff", "outcome", "url", "token"} <= set(
        CORE_MODULES
    )


@pytest.mark.parametrize("module", CORE_MODULES)
def test_no_io_import_in_source(module: str) -> None:
    path = CORE_DIR / f"{module}.py"
    bad = [
        f"line {line}: {name}"
        for name, line in _imports(path)
        if name.split(".")[0] in FORBIDDEN
        or (name.startswith("trio_relay.") and not name.startswith("trio_relay._core"))
    ]
    assert not bad, f"_core/{module}.py imports I/O machinery or the shell: {bad}"


_CHILD = r"""
import importlib, json, sys, types

package_dir, modules = sys.argv[1], sys.argv[2:]
stub = types.ModuleType("trio_relay")
stub.__path__ = [package_dir]
sys.modules["trio_relay"] = stub
for module in modules:
    importlib.import_module("trio_relay._core." + module)
print(json.dumps({"stub_kept": sys.modules["trio_relay"] is stub, "modules": sorted(sys.modules)}))
"""


def test_importing_the_whole_core_loads_no_io_machinery() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(PACKAGE_DIR), *CORE_MODULES],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(proc.stdout)
    assert report["stub_kept"], "trio_relay/__init__.py ran: the check would be void"
    loaded = {name.split(".")[0] for name in report["modules"]}
    assert not loaded & FORBIDDEN
    shell = [m for m in report["modules"] if m.startswith("trio_relay._trio")]
    assert not shell, f"the core pulled in the shell: {shell}"
