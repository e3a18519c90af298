"""MkDocs hook: the RelayConfig fields table, generated from the code at build time.

A page that holds the line ``<!-- relay-config-fields -->`` gets, in its place, one row
per dataclass field of `trio_relay.RelayConfig`: its name, type, default and
docstring (the string literal under the field), so the table cannot drift from the code.
A field without a docstring fails the build."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

import trio_relay

MARKER = "<!-- relay-config-fields -->"


def field_docs(cls: type) -> dict[str, str]:
    """Each annotated attribute's docstring, read from the class's source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"`{value.__module__}.{value.__qualname__}`"
    return f"`{value!r}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_table() -> str:
    docs = field_docs(trio_relay.RelayConfig)
    rows = ["| field | type | default | what it sets |", "|---|---|---|---|"]
    missing = []
    for field in dataclasses.fields(trio_relay.RelayConfig):
        if field.name not in docs:
            missing.append(field.name)
            continue
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        rows.append(
            f"| `{field.name}` | `{_cell(str(kind))}` | {_cell(_default(field))} "
            f"| {_cell(docs[field.name])} |"
        )
    if missing:
        raise ValueError(f"RelayConfig fields without a docstring: {', '.join(missing)}")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, config_table())
    return markdown
