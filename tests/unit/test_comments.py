"""Code that speaks of the code: no comment or docstring in the repository's Python names
an issue or points to a document outside the repository; the design it relies on is in
docs/ (docs/design.md)."""

from __future__ import annotations

import re
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


def test_no_comment_names_an_issue_or_an_outside_document() -> None:
    files = python_files()
    assert len(files) > 100  # the walk found the tree
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "say what the code does instead:\n" + "\n".join(hits)
