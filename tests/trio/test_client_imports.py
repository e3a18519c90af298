"""The client's import graph holds one WebSocket library, behind the two modules of the
WebSocket client (issue 10, issue 11): the upgrade and the open socket. trio-websocket
and wsproto stay with the reference connector."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import trio_relay

PACKAGE = Path(trio_relay.__file__).resolve().parent
WEBSOCKET_LIBRARIES = ("websockets", "trio_websocket", "wsproto")


def test_importing_the_client_loads_neither_trio_websocket_nor_wsproto() -> None:
    code = (
        "import json, sys; import trio_relay, trio_relay.http; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code])))
    assert "websockets" in loaded
    assert not loaded & {"trio_websocket", "wsproto"}


def test_only_the_websocket_client_imports_a_websocket_library() -> None:
    importers = set()
    for path in PACKAGE.rglob("*.py"):
        if "testing" in path.relative_to(PACKAGE).parts:
            continue  # the reference connector is a WebSocket server of its own
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(name.split(".")[0] in WEBSOCKET_LIBRARIES for name in names):
                importers.add(str(path.relative_to(PACKAGE)))
    assert importers == {"_trio/link/websocket.py", "_trio/link/upgrade.py"}


def _base_closure(distribution: str) -> set[str]:
    """``distribution`` and everything its unconditional requirements pull in."""
    seen: set[str] = set()
    todo = [distribution]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_importing_the_client_loads_only_what_its_base_requirements_install() -> None:
    # A dependency only the dev extras install (websockets was one) works in CI and
    # fails at `import trio_relay` after a plain `pip install trio_relay`.
    code = (
        "import json, sys; import trio_relay; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    # As a base install has it: without the optional C codec (the speedups extra, which
    # the dev install brings and `import trio_relay` then takes up on purpose).
    env = {**os.environ, "TRIO_RELAY_PURE_JSON": "1"}
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code], env=env)))
    third_party = {
        name
        for name in loaded - set(sys.stdlib_module_names) - {"trio_relay"}
        if not name.startswith("_")
    }
    owners = metadata.packages_distributions()
    installed_by_base = _base_closure("trio_relay")
    undeclared = {
        name: owners.get(name)
        for name in third_party
        if not {canonicalize_name(d) for d in owners.get(name, [])} & installed_by_base
    }
    assert not undeclared, f"imported, not installed by the requirements: {undeclared}"


# Issue 22: the reference connector's libraries are the `testing` extra, not requirements.
_WITHOUT_TESTING_EXTRA = (
    "import sys\n"
    "sys.modules['trio_websocket'] = None  # as after a base install: importing fails\n"
    "sys.modules['wsproto'] = None\n"
)


def test_the_base_requirements_leave_out_the_reference_connectors_libraries() -> None:
    base = _base_closure("trio_relay")
    assert "trio" in base and "websockets" in base
    assert not base & {"trio-websocket", "wsproto"}
    testing = {
        canonicalize_name(Requirement(spec).name)
        for spec in metadata.requires("trio_relay") or []
        if Requirement(spec).marker is not None
        and Requirement(spec).marker.evaluate({"extra": "testing"})  # type: ignore[union-attr]
    }
    assert {"trio-websocket", "wsproto"} <= testing


def test_the_reference_connector_without_its_extra_names_the_extra() -> None:
    code = _WITHOUT_TESTING_EXTRA + (
        "import trio_relay, trio_relay.http, trio_relay.cli\n"
        "try:\n"
        "    import trio_relay.testing\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "pip install 'trio_relay[testing]'" in done.stdout
    # Until the package is on the index, that command fails: the checkout's form too.
    assert "from a checkout: pip install '.[testing]'" in done.stdout
    assert "trio-websocket and wsproto" in done.stdout


_CLI_WITHOUT_TESTING_EXTRA = _WITHOUT_TESTING_EXTRA + (
    "import sys\nfrom trio_relay.cli import main\nsys.exit(main(sys.argv[1:]))\n"
)


def test_the_command_without_the_testing_extra_runs_its_other_commands() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _CLI_WITHOUT_TESTING_EXTRA, "probe", "--help"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert "usage:" in probe.stdout


@pytest.mark.parametrize(
    "arguments",
    [[], ["--port", "8765"], ["--no-auth", "--port", "8765"], ["--help"]],
    ids=["no arguments", "--port", "--no-auth --port", "--help"],
)
def test_the_connector_without_the_testing_extra_names_the_extra_whatever_its_arguments(
    arguments: list[str],
) -> None:
    # The docs' own `trio-relay connector --port 8765` once died with "unrecognized
    # arguments: --port" in a base install: the hint came only without arguments.
    connector = subprocess.run(
        [sys.executable, "-c", _CLI_WITHOUT_TESTING_EXTRA, "connector", *arguments],
        capture_output=True, text=True,
    )  # fmt: skip
    assert connector.returncode == 1, connector.stderr
    assert connector.stderr.startswith("trio-relay connector: ")
    assert "pip install 'trio_relay[testing]'" in connector.stderr
    assert "pip install '.[testing]'" in connector.stderr
    assert "unrecognized arguments" not in connector.stderr
