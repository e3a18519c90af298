"""Every Python block a reader sees in README.md and docs/ is in the Markdown itself (the
forge shows it too) and is proved here, with pydantic's pytest-examples finding them:

- a block titled with a file (```` ```python title="examples/quickstart.py" ````) is that
  file, verbatim; the example tests run the file (tests/integration/test_examples.py and
  the tests named in each page) and mypy --strict checks it in CI;
- any other block is a whole program, and runs here as ``__main__``.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = list(find_examples(ROOT / "README.md", ROOT / "docs"))
TITLED = [e for e in EXAMPLES if "title" in e.prefix_settings()]
PROGRAMS = [e for e in EXAMPLES if "title" not in e.prefix_settings()]


def _id(example: CodeExample) -> str:
    return f"{example.path.relative_to(ROOT)}:{example.start_line}"


def _where(example: CodeExample, error: BaseException) -> str:
    """The page and line of the deepest frame of ``error`` inside ``example``."""
    line, tb = example.start_line, error.__traceback__
    while tb is not None:
        line, tb = tb.tb_lineno, tb.tb_next
    return f"{example.path.relative_to(ROOT)}:{line}"


def test_the_docs_have_both_kinds_of_block() -> None:
    assert TITLED and PROGRAMS


def test_no_page_includes_code_the_forge_cannot_show() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        assert "--8<--" not in page.read_text(), page


@pytest.mark.parametrize("example", TITLED, ids=_id)
def test_a_titled_block_is_its_file_verbatim(example: CodeExample) -> None:
    title = example.prefix_settings()["title"]
    path = ROOT / title
    assert path.parent == ROOT / "examples" and path.is_file(), title
    assert example.source == path.read_text(), f"{_id(example)} differs from {title}"


@pytest.mark.parametrize("example", PROGRAMS, ids=_id)
def test_every_other_block_runs(example: CodeExample, eval_example: EvalExample) -> None:
    thresholds = gc.get_threshold()  # the deployment page tunes the process's collector
    failure = None
    try:
        # A `#>` comment after a print() is what it prints, checked.
        eval_example.run_print_check(example)
    except Exception as error:
        # pytest-examples re-raises with a traceback of frames it forges to point into the
        # Markdown; on Python 3.11 pytest's reporter crashes reading their positions
        # (INTERNALERROR, "generator raised StopIteration"). Report the page's line instead,
        # outside this block so the forged traceback is not chained to the failure.
        failure = f"{_where(example, error)}: {type(error).__name__}: {error}"
    finally:
        gc.set_threshold(*thresholds)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_the_quickstart_leads_the_readme() -> None:
    first = next(e for e in EXAMPLES if e.path == ROOT / "README.md")
    assert first.prefix_settings().get("title") == "examples/quickstart.py"
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^## Quickstart$", readme, re.M)
