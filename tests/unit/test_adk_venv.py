"""The ADK virtualenv's build-or-reuse logic, on a folder of the test's own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests import adk_venv as venv


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of one pyproject.toml, with the venv and its lock inside it."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.setattr(venv, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(venv, "VENV_DIR", tmp_path / ".venv-adk")
    monkeypatch.setattr(venv, "LOCK_PATH", tmp_path / ".venv-adk.lock")
    monkeypatch.setattr(venv, "_failure", None)
    return tmp_path


def _fake_built(stamp: str) -> Path:
    python = venv.venv_python()
    python.parent.mkdir(parents=True)
    python.write_text("")
    (venv.VENV_DIR / venv.STAMP_NAME).write_text(stamp + "\n")
    return python


def _refuse_to_build() -> None:
    raise AssertionError("built again although the stamp matched")


def test_a_venv_whose_stamp_matches_is_reused(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = _fake_built(venv.expected_stamp())
    monkeypatch.setattr(venv, "_build", _refuse_to_build)
    assert venv.adk_venv() == python


def test_a_changed_pyproject_changes_the_stamp(repo: Path) -> None:
    before = venv.expected_stamp()
    (repo / "pyproject.toml").write_text('[project]\nname = "y"\n')
    assert venv.expected_stamp() != before


def test_a_failed_build_reports_its_output_writes_no_stamp_and_is_not_retried(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_built("an older pyproject's stamp")
    runs: list[str] = []

    def failing_steps() -> list[tuple[list[str], float, str]]:
        runs.append("build")
        script = "import sys; print('no matching distribution'); sys.exit(3)"
        return [([sys.executable, "-c", script], 60, "pip install")]

    monkeypatch.setattr(venv, "_build_steps", failing_steps)
    with pytest.raises(venv.AdkVenvError, match=r"(?s)pip install exited 3.*no matching"):
        venv.adk_venv()
    # The stale venv was removed before the build, and no stamp says it is usable.
    assert not venv.VENV_DIR.exists()
    with pytest.raises(venv.AdkVenvError):
        venv.adk_venv()
    assert runs == ["build"]


def test_the_environment_for_the_venv_drops_the_dev_venvs_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("TOOLFLEET_KEPT", "1")
    env = venv.clean_env()
    assert "VIRTUAL_ENV" not in env and "PYTHONPATH" not in env
    assert env["TOOLFLEET_KEPT"] == "1"
