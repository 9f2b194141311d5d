"""The README's first agent, as a new user follows it: the code block saved as
myagent.py in a folder of its own, run with `toolfleet run` on the embedded default
(no Redis configured, no API key)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r'^toolfleet run --agent myagent:agent "(?P<message>[^"]+)"$', re.M)


def test_the_readmes_first_agent_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"Write `myagent.py`:\n\n```python\n(?P<code>.*?)```", readme, re.S)
    command = COMMAND.search(readme)
    assert code and command, "the README's first agent or its run command moved"
    (tmp_path / "myagent.py").write_text(code.group("code"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_", "PYTHON"))
    }
    env["TMPDIR"] = str(tmp_path)
    toolfleet = Path(sys.executable).with_name("toolfleet")  # as the activated venv has it
    done = subprocess.run(
        [str(toolfleet), "run", "--agent", "myagent:agent", command.group("message")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = re.findall(r"^\s+ok get_price .* on (\S+@\S+) pid (\d+)", done.stdout, re.M)
    assert len(results) == 3, done.stdout  # the three lookups, each on a worker process
    assert "[prices] GOOG is at 175.2." in done.stdout
