"""The `toolfleet` script imports the user's modules from the directory it runs in."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from toolfleet.orchestrator.cli.main import main


def test_an_agent_module_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = f"trip_agents_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("not_an_agent = 1\n")
    monkeypatch.chdir(tmp_path)
    # What the installed script's interpreter has: its own directory first, not this one
    # (`python -m toolfleet` would have put the working directory there).
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, module, raising=False)

    assert main(["run", "--agent", f"{module}:not_an_agent", "hi"]) == 2

    # It imported the module (not "cannot import"): the attribute is what it refused.
    assert f"not_an_agent in {module} is not an Agent (it defines no Agent)" in (
        capsys.readouterr().err
    )
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_a_misspelt_agent_is_said_to_be_missing_naming_the_agents_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--agent", "examples.weather:agnt", "hi"]) == 2
    err = capsys.readouterr().err
    assert "agnt in examples.weather has no such name (its agents: agent)" in err
    assert "Traceback" not in err
