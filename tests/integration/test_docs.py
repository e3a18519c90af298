"""Code in the docs runs or is checked (issue 22): whole programs are included from
examples/ (which other tests run) with ``--8<--`` snippets; every other Python block
must parse and may use only names the public API has."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import trio_relay

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$')


def _blocks() -> list[tuple[Path, str]]:
    return [(page, m.group(1)) for page in PAGES for m in BLOCK.finditer(page.read_text())]


def test_the_docs_have_python_blocks_to_check() -> None:
    assert any(SNIPPET.match(code.strip()) for _, code in _blocks())


def test_included_code_is_an_example_file() -> None:
    for page, code in _blocks():
        lines = [line for line in code.splitlines() if line.strip()]
        if not any(SNIPPET.match(line) for line in lines):
            continue
        assert len(lines) == 1, f"{page.name}: a snippet block holds only the include"
        match = SNIPPET.match(lines[0])
        assert match is not None
        target = ROOT / match.group(1)
        assert target.parent == ROOT / "examples" and target.is_file(), (page.name, target)


def _attribute_uses(tree: ast.AST, base: str) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == base
    }


def test_every_other_python_fragment_parses_and_uses_only_public_names() -> None:
    for page, code in _blocks():
        if SNIPPET.match(code.strip()):
            continue
        # Fragments may await at top level, as inside a handler: parse them as a body.
        tree = ast.parse("async def _fragment():\n" + textwrap.indent(code, "    "))
        unknown = {n for n in _attribute_uses(tree, "trio_relay") if n not in trio_relay.__all__}
        assert not unknown, f"{page.name}: trio_relay has no {sorted(unknown)}"
        # An attribute set per instance is declared on the class (``media: RelayMedia``)
        # or named in the class docstring (``stats``).
        documented = set(re.findall(r"``(\w+)``", trio_relay.Relay.__doc__ or ""))
        declared = set(dir(trio_relay.Relay)) | set(trio_relay.Relay.__annotations__) | documented
        missing = _attribute_uses(tree, "relay") - declared
        assert not missing, f"{page.name}: Relay has no {sorted(missing)}"


def test_the_readmes_quickstart_is_the_example_file_verbatim() -> None:
    # The README is rendered where snippets are not (PyPI, the forge): it holds a copy,
    # which must stay the file that test_examples.py runs.
    blocks = BLOCK.findall(README.read_text())
    assert blocks, "the README has no quickstart"
    quickstart = (ROOT / "examples" / "quickstart.py").read_text()
    body = quickstart.split('"""', 2)[2].lstrip("\n")  # without the module docstring
    assert blocks[0] == body
    assert len(blocks) == 1, "other Python belongs in an example file the docs include"
