"""A wheel built from the repository, installed (not editable) in a fresh virtualenv:
one import name, the facade, and `toolfleet demo` running from that install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

CHECK_IMPORTS = """
import importlib, json, sys
import toolfleet
from toolfleet import (Agent, AgentTool, AuthConfig, BaseToolset, FunctionTool, JobContext,
    LongRunningFunctionTool, Runner, Settings, ToolContext, ToolError, job, post_result, tool)
found = [n for n in ("shared", "workers", "orchestrator", "examples")
         if importlib.util.find_spec(n) is not None]
print(json.dumps({"version": toolfleet.__version__, "file": toolfleet.__file__, "found": found}))
"""


def run(command: list[str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


# It builds a wheel, installs it with its dependencies in a new virtualenv and runs the
# demo: about 50 s on a quiet 2-core machine, more than the suite's 120 s per test while
# the other test processes load it.
@pytest.mark.timeout(600)
def test_the_wheel_installs_one_import_name_and_its_demo_runs(tmp_path: Path) -> None:
    dist, venv, source = tmp_path / "dist", tmp_path / "venv", tmp_path / "source"
    # pip builds in the source tree (build/, *.egg-info): build a copy, links kept as links.
    # Not the virtualenvs (.venv-adk is half a gigabyte, and another test process may be
    # building it meanwhile) nor CI's artifacts, which page tests may be writing.
    skip = shutil.ignore_patterns(
        ".git", ".venv*", ".ci", ".*_cache", "__pycache__", "build", "dist", "*.egg-info", "out"
    )
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), "."], source)
    (wheel,) = dist.glob("toolfleet-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        (top_level,) = [n for n in archive.namelist() if n.endswith("top_level.txt")]
        assert archive.read(top_level).decode().split() == ["toolfleet"]
        # Users' type checkers read toolfleet's annotations only with the PEP 561 marker.
        assert "toolfleet/py.typed" in archive.namelist()
        assert any(".dist-info/" in n and n.endswith("/LICENSE") for n in archive.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"toolfleet"}

    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", str(wheel)], tmp_path, timeout=600)

    # From a folder outside the repository: only what was installed can be imported.
    checked = run([str(python), "-c", CHECK_IMPORTS], tmp_path)
    report = checked.stdout.strip().splitlines()[-1]
    assert '"found": []' in report, report
    assert str(venv) in report and str(ROOT) not in report, report

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_", "PYTHON"))
    }
    env.update(TMPDIR=str(tmp_path), TOOLFLEET_DEMO_CONFIRM_AFTER_S="0.5")
    demo = run([str(venv / "bin" / "toolfleet"), "demo"], tmp_path, env=env, timeout=120)
    assert "book_hotel was completed in the background by a worker job" in demo.stdout
    assert "Hotel Lumière is confirmed" in demo.stdout
