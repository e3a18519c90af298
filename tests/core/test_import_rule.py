"""The sans-I/O core imports no Trio, no socket library and no HTTP client
(``docs/architecture.md``, on the layers), and no module of ``trio_relay`` takes part in
an import cycle. No hand-kept list: every module is checked, so a new module is covered
the moment it exists.

Three checks. The cycle check walks every module's imports (``TYPE_CHECKING`` ones
included: a cycle in types is still one a reader must untangle). The static one reads
each module's import statements, so a forbidden import behind an ``if`` or inside a
function is caught too. The dynamic one imports the whole core in a fresh interpreter,
with ``trio_relay/__init__.py`` (which loads the shell) kept out by a stub package, and
looks at what came along transitively.
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports."""
    paths = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets += [target] + [f"{target}.{alias.name}" for alias in node.names]
        edges: set[str] = set()
        for target in targets:
            while target not in paths and "." in target:
                target = target.rsplit(".", 1)[0]
            # A module always loads the packages above it: that is no cycle of its making.
            if target in paths and target != name and not name.startswith(target + "."):
                edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_package() -> None:
    graph = _import_graph()
    # The walk resolves relative imports (``from ..._core.settings import ...``).
    assert "trio_relay._core.settings" in graph["trio_relay._trio.inbound.pipeline"]
    assert _cycles(graph) == []
