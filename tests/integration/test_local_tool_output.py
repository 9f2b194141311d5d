"""What a tool prints on the local workers of `toolfleet run` shows in the command's own
output, as it would where the tool ran in the program: its stdout lines on stdout before the
agent's answer that follows the call, its stderr and its warnings on stderr, and none of
Celery's own lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.printing_tools import LINES
from tests.leftovers import assert_nothing_left

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_run_shows_what_the_tool_printed_before_the_answer(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_"))
    }
    env.update(TMPDIR=str(tmp_path))
    agent = "tests.integration.printing_tools:agent"
    done = subprocess.run(
        [sys.executable, "-m", "toolfleet", "run", "--agent", agent, "count the sheep"],
        env=env, capture_output=True, text=True, timeout=110, cwd=REPO,
    )  # fmt: skip

    out = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    sheep = [f"sheep {i}" for i in range(LINES)]
    dispatched = out.index("  → dispatched 1 call(s) to the fleet")
    first = out.index(sheep[0])
    # Every line, whole and in the tool's order, after the call and before the answer.
    assert out[first : first + LINES] == sheep
    assert dispatched < first < out.index("[shepherd] ANSWER: all sheep counted")
    errors = done.stderr.splitlines()
    assert "to stderr: done counting" in errors
    assert "logged: 200 sheep" in errors  # a WARNING, the message alone
    assert "logged below WARNING: not shown" not in done.stderr
    # Celery's own lines (log records, banner, shutdown notes) stay in the worker's log.
    for line in out + errors:
        assert "celery" not in line.lower() and "shutdown" not in line.lower(), line
    assert_nothing_left(tmp_path)  # server dir, worker logs, URL file: all gone
