"""Commit history that reads: every commit after the rule began has a subject of at most
72 characters and a body (`git log --oneline` stays readable, and each change says why)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The last commit before subjects were held to 72 characters and bodies required.
RULE_BEGAN_AFTER = "8709d0e"
MAX_SUBJECT = 72
# Commits that landed breaking the rule while it was new; history is not rewritten.
EXCUSED = {"429342c9a", "5e15d986d", "aa26a45e0", "bc2f43e7e", "df052321d"}


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )


def new_commits() -> list[tuple[str, str, str]]:
    """(hash, subject, body) of each commit after the rule began, newest first."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: there is no history to check")
    if git("cat-file", "-e", f"{RULE_BEGAN_AFTER}^{{commit}}").returncode != 0:
        pytest.skip(f"a shallow checkout: {RULE_BEGAN_AFTER} is not in its history")
    listed = git("log", "--no-merges", "--format=%H%x00%s%x00%b%x1e", f"{RULE_BEGAN_AFTER}..HEAD")
    assert listed.returncode == 0, listed.stderr
    records = [r.strip("\n") for r in listed.stdout.split("\x1e") if r.strip()]
    return [(h, s, b) for h, s, b in (r.split("\x00") for r in records)]


def test_every_new_subject_fits_in_72_characters() -> None:
    long = [
        f"{commit[:9]} ({len(subject)}): {subject}"
        for commit, subject, _ in new_commits()
        if len(subject) > MAX_SUBJECT and commit[:9] not in EXCUSED
    ]
    assert not long, "subjects over 72 characters (reword them):\n" + "\n".join(long)


def test_every_new_commit_has_a_body_that_says_why() -> None:
    bare = [
        commit[:9]
        for commit, _, body in new_commits()
        if not body.strip() and commit[:9] not in EXCUSED
    ]
    assert not bare, f"commits without a body: {', '.join(bare)}"
