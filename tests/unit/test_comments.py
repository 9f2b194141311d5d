"""Code that speaks of the code: no comment or docstring in the repository's Python names
an issue or points to a document outside the repository; the design it relies on is in
docs/ (docs/design.md)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("orchestrator", "workers", "shared", "toolfleet", "tests", "bench", "examples")
OUTSIDE = re.compile(r"\bissue \d+|\.\./shared/|\bDESIGN\b(?!\.md)|\bMEASURED\.md\b", re.I)


def python_files() -> list[Path]:
    found = {
        path.resolve()
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    return sorted(found - {Path(__file__).resolve()})


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring of `source`: what speaks of the code,
    not the strings a program uses."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first.lineno, first.value.value


def test_no_comment_names_an_issue_or_an_outside_document() -> None:
    files = python_files()
    assert len(files) > 100  # the walk found the tree
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}"
        for path in files
        for line, text in prose(path.read_text())
        if (match := OUTSIDE.search(text))
    ]
    assert not hits, "say what the code does instead:\n" + "\n".join(hits)


def test_the_check_reads_comments_and_docstrings_but_not_strings() -> None:
    source = '"""Module (issue 7)."""\nx = "issue 8"  # see issue 9\n'
    found = [OUTSIDE.search(text) for _, text in prose(source)]
    assert sorted(m.group(0) for m in found if m) == ["issue 7", "issue 9"]
