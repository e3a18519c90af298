"""Benchmarks: trio_relay against an asyncio baseline of the design it replaces.

This directory is part of the source tree, not of the wheel: ``trio-relay bench`` (and
the tests) import it as ``trio_relay_benchmarks`` from a checkout. A benchmark that
starts a Python child running one of these modules builds its command line with
:func:`module_argv`, which imports the package the same way in the child."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent

_BOOT = (
    "import importlib.util, runpy, sys\n"
    "root, module = sys.argv[1], sys.argv[2]\n"
    "spec = importlib.util.spec_from_file_location("
    "'trio_relay_benchmarks', root + '/__init__.py', submodule_search_locations=[root])\n"
    "package = importlib.util.module_from_spec(spec)\n"
    "sys.modules['trio_relay_benchmarks'] = package\n"
    "spec.loader.exec_module(package)\n"
    "sys.argv = [module, *sys.argv[3:]]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def module_argv(module: str) -> list[str]:
    """The command that runs ``python -m <module>`` for a module of this package; the
    child finds the package by path, as ``trio-relay bench`` does, since it is not
    installed under its import name."""
    return [sys.executable, "-c", _BOOT, str(ROOT), module]
