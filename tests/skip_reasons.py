"""Skip reasons that survive pytest-trio: a pytest hook, imported by ``conftest.py``.

pytest-trio 0.8.0 (its latest release) runs an async test and its async fixtures in one
``trio.run``; a ``pytest.skip(reason)`` inside comes out of the run in an exception
group, and the plugin re-raises the lone ``Skipped`` as a bare ``pytest.skip()``. The
reason is lost, and ``-rs`` shows only ``_pytest/python.py:187: Skipped``. The original
is still the new exception's ``__context__``: this hook puts its reason and location
back in the report, through pytest's public API.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path

import pytest

__all__ = ["pytest_runtest_makereport", "run_probe"]

SKIP = pytest.skip.Exception


def _lost_skip(exc: BaseException) -> BaseException | None:
    """The ``Skipped`` that pytest-trio re-raised without its reason, or ``None``."""
    if not isinstance(exc, SKIP) or exc.msg:
        return None
    group = exc.__context__
    if not isinstance(group, BaseExceptionGroup):
        return None
    skips, _ = group.split(SKIP)
    leaves: list[BaseException] = []
    pending: list[BaseException] = [skips] if skips is not None else []
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    return leaves[0] if len(leaves) == 1 else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    original = None if call.excinfo is None else _lost_skip(call.excinfo.value)
    if report.skipped and original is not None:
        info = pytest.ExceptionInfo.from_exception(original)
        shown = [entry for entry in info.traceback if not entry.ishidden(info)]
        where = (shown or list(info.traceback))[-1]  # the line that called pytest.skip
        report.longrepr = (str(where.path), where.lineno + 1, f"Skipped: {original}")
    return report


TESTS = Path(__file__).resolve().parent


def run_probe(
    tmp_path: Path, source: str, *, env: Mapping[str, str], path: Sequence[Path] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a test file under the suite's own plugin set (pytest-trio in
    trio mode, this hook), with ``-rs``; ``path`` is prepended to ``PYTHONPATH``."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n")
    (tmp_path / "conftest.py").write_text(
        "from skip_reasons import pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_probe.py").write_text(source)
    variables = dict(env)
    variables["PYTHONPATH"] = os.pathsep.join(
        [*map(str, path), str(TESTS), variables.get("PYTHONPATH", "")]
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, timeout=60, env=variables, cwd=tmp_path, check=False,
    )  # fmt: skip
