"""MkDocs hook: the configuration reference, generated from the settings classes.

A page holds a marker `<!-- settings: module.Class -->`; the hook replaces it with a table
of that class's variables (its env prefix and field names), defaults and descriptions,
so the page and the code cannot drift.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

MARKER = re.compile(r"<!-- settings: ([\w.]+)\.(\w+) -->")


def settings_table(cls: type[BaseSettings]) -> str:
    """A Markdown table of `cls`'s variables: name, default and description."""
    prefix = str(cls.model_config.get("env_prefix", "")).upper()
    rows = ["| variable | default | what it sets |", "| --- | --- | --- |"]
    for name, field in cls.model_fields.items():
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        if not description:
            raise ValueError(f"{cls.__name__}.{name} has no description: give its Field one")
        rows.append(f"| `{prefix}{name.upper()}` | {default_of(field)} | {description} |")
    return "\n".join(rows)


def default_of(field: FieldInfo) -> str:
    """The field's default as a reader sets it: JSON, or `unset`."""
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return f"`{','.join(value)}`" if value else "empty"
    return f"`{json.dumps(value, default=str)}`"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each settings marker of a page with its table."""

    def table(match: re.Match[str]) -> str:
        cls = getattr(importlib.import_module(match.group(1)), match.group(2))
        return settings_table(cls)

    return MARKER.sub(table, markdown)
