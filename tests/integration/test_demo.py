"""`toolfleet demo` on a fresh machine: no Redis configured, no API key, nothing left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.leftovers import assert_nothing_left

pytestmark = pytest.mark.integration


def process_cmdlines() -> list[str]:
    lines = []
    for proc in Path("/proc").iterdir():
        try:
            lines.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # not a process, or it exited meanwhile
            continue
    return lines


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to list processes")
def test_demo_runs_to_completion_and_leaves_no_process_or_temp_file(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_"))
    }
    env.update(TMPDIR=str(tmp_path), TOOLFLEET_DEMO_CONFIRM_AFTER_S="0.5")

    done = subprocess.run(
        [sys.executable, "-m", "toolfleet", "demo"],
        env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip

    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "model: offline scripted model (no GOOGLE_API_KEY/GEMINI_API_KEY set)" in out
    fan_out = re.search(r"5 tool calls in one model turn ran on (\d+) worker processes", out)
    assert fan_out is not None and int(fan_out.group(1)) > 1, out
    assert "book_hotel was completed in the background by a worker job" in out
    assert "Hotel Lumière is confirmed" in out
    port = re.search(r"on redis://127\.0\.0\.1:(\d+)/0", out)
    workers = re.findall(r"^worker (\S+@\S+):", out, flags=re.M)
    assert port is not None and len(workers) == 3
    leftovers = [
        line
        for line in process_cmdlines()
        if f"127.0.0.1:{port.group(1)}" in line
        or f"--port {port.group(1)}" in line
        or any(w in line for w in workers)
    ]
    assert leftovers == []
    assert_nothing_left(tmp_path)  # server dir, worker logs, URL file: all gone
