"""The docs site as a reader gets it: built the way the README says (ProperDocs, strict),
then read back.

- Every public name (``trio_relay.__all__``, ``trio_relay.testing.__all__``,
  ``trio_relay.http.__all__``) has an entry in the API reference (its anchor).
- No page shows a raw Sphinx role (mkdocstrings renders none of them: they appeared
  as text, ":class: Outcome").
- The build prints no end-of-life banner (Material prints one under the ``mkdocs``
  command unless an environment variable is set) and no warning.
- Code blocks fit the content column (docs/stylesheets/code.css) and no code line is
  wider than the project's line length.

The build takes a few seconds; it is the same build as CI's ``properdocs build``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import trio_relay
import trio_relay.http
import trio_relay.testing

ROOT = Path(__file__).resolve().parents[2]
LINE_LENGTH = 100  # [tool.ruff] line-length: the examples are shown as they are
RAW_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|obj|data|py:\w+):`?")
PUBLIC = {
    "trio_relay": trio_relay.__all__,
    "trio_relay.testing": trio_relay.testing.__all__,
    "trio_relay.http": trio_relay.http.__all__,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The built site's directory and what the build printed."""
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "properdocs", "build", "--strict", "-f", "mkdocs.yml",
         "--site-dir", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout + done.stderr


def _pages(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): p.read_text() for p in site.rglob("*.html")}


def test_the_build_prints_no_banner_and_no_warning(site: tuple[Path, str]) -> None:
    _, printed = site
    assert "end of life" not in printed, printed
    assert "WARNING" not in printed, printed


def test_every_public_name_has_an_entry(site: tuple[Path, str]) -> None:
    anchors = {a for html in _pages(site[0]).values() for a in re.findall(r'id="([\w.]+)"', html)}
    missing = [
        f"{module}.{name}"
        for module, names in PUBLIC.items()
        for name in names
        if f"{module}.{name}" not in anchors
    ]
    assert not missing, f"no entry in the API reference (docs/reference/api/): {missing}"


def test_no_page_shows_a_raw_sphinx_role(site: tuple[Path, str]) -> None:
    found = {
        page: sorted(set(RAW_ROLE.findall(re.sub(r"<[^>]+>", "", html))))
        for page, html in _pages(site[0]).items()
    }
    found = {page: roles for page, roles in found.items() if roles}
    assert not found, f"raw roles (write [`Name`][trio_relay.Name] instead): {found}"


def test_the_reference_connectors_inherited_methods_are_documented(
    site: tuple[Path, str],
) -> None:
    # What the tutorial and the testing how-to call: defined on its base class.
    html = _pages(site[0])["reference/api/testing/index.html"]
    for name in ("say", "press", "transcript_text", "wait_until", "acks", "latest_prompt"):
        assert f'id="trio_relay.testing.ReferenceConnector.{name}"' in html, name


def test_a_code_block_of_100_columns_fits_the_content_column(site: tuple[Path, str]) -> None:
    css = (ROOT / "docs" / "stylesheets" / "code.css").read_text()
    assert "stylesheets/code.css" in _pages(site[0])["index.html"]
    grid = re.search(r"\.md-grid\s*\{\s*max-width:\s*([\d.]+)rem", css)
    assert grid is not None, "code.css sets the grid's width"
    # Material: 20 px a rem, two 12.1rem sidebars, 1.2rem margins each side of the
    # content; code at 0.8rem * 0.85 in Roboto Mono (0.6 em a column), 1.18 em padding.
    rem = 20.0
    content = (float(grid.group(1)) - 2 * 12.1 - 2 * 1.2) * rem
    code_font = 0.8 * rem * 0.85
    needed = LINE_LENGTH * 0.6 * code_font + 2 * 1.18 * code_font
    assert content >= needed, f"{content:.0f} px for {needed:.0f} px of code"


def test_no_code_line_in_the_docs_is_wider_than_the_line_length() -> None:
    wide = []
    # The benchmarks page's command table is rewritten with the benchmarks themselves.
    exempt = {ROOT / "docs" / "explanation" / "benchmarks.md"}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if page in exempt:
            continue
        in_code = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            elif in_code and len(line) > LINE_LENGTH:
                wide.append(f"{page.relative_to(ROOT)}:{number} ({len(line)})")
    assert not wide, wide


def _merged_inits_off() -> set[str]:
    """The classes whose reference leaves their ``__init__`` out (made by the library,
    never by the user): their constructor's parameters are not shown."""
    names = set()
    for page in (ROOT / "docs" / "reference" / "api").glob("*.md"):
        for match in re.finditer(
            r"^::: ([\w.]+)\n((?:    .*\n)+)", page.read_text(), re.M
        ):  # fmt: skip
            if "merge_init_into_class: false" in match.group(2):
                names.add(match.group(1))
    return names


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _undescribed(where: str, function: object, doc: str) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    return [
        f"{where}({name})"
        for name in parameters
        if name not in ("self", "cls") and not re.search(rf"\b{re.escape(name)}\b", doc)
    ]


def test_every_parameter_shown_in_the_reference_is_described() -> None:
    # The reference shows a function's or method's signature with its docstring, and a
    # class's with its __init__'s parameters (merge_init_into_class): a parameter its
    # docstring never names is one the reader must guess. Methods without a docstring
    # are not shown; ConnectorOptions' fields are described on ConnectorOptions.
    options = {field.name for field in dataclasses.fields(trio_relay.testing.ConnectorOptions)}
    merged_off = _merged_inits_off()
    undescribed: list[str] = []
    for module, names in PUBLIC.items():
        for name in names:
            obj = getattr(sys.modules[module], name)
            where = f"{module}.{name}"
            if inspect.isclass(obj):
                if dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum):
                    continue  # fields, each with its own docstring
                init = vars(obj).get("__init__")
                if init is not None and where not in merged_off and not _is_protocol(obj):
                    doc = (obj.__doc__ or "") + (init.__doc__ or "")  # merged, as shown
                    undescribed += _undescribed(where, init, doc)
                for member, value in vars(obj).items():
                    if not member.startswith("_") and inspect.isfunction(value) and value.__doc__:
                        undescribed += _undescribed(f"{where}.{member}", value, value.__doc__)
            elif inspect.isfunction(obj) and obj.__doc__:
                doc = obj.__doc__
                missing = _undescribed(where, obj, doc)
                if "ConnectorOptions" in doc:
                    missing = [m for m in missing if m.rsplit("(", 1)[1][:-1] not in options]
                undescribed += missing
    assert not undescribed, f"parameters the docstring never names: {undescribed}"


def test_no_page_shows_a_restructuredtext_literal_marker(site: tuple[Path, str]) -> None:
    # "text::" then an indented block is reStructuredText; Markdown shows the "::".
    found = [
        page
        for page, html in _pages(site[0]).items()
        if re.search(r"\S::[ \t]*$", re.sub(r"<[^>]+>", "", html), re.M)
    ]
    assert not found, f"'::' before a code block (use a ``` fence): {found}"
