"""The documentation site builds offline in strict mode (a broken link, reference or
docstring fails it), and its configuration reference lists every setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from toolfleet.orchestrator.httpapi.settings import HttpSettings
from toolfleet.shared.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_in_strict_mode_with_every_setting(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr

    configuration = (site / "configuration" / "index.html").read_text()
    for cls in (Settings, HttpSettings):
        prefix = str(cls.model_config["env_prefix"])
        for name in cls.model_fields:
            assert f"{prefix}{name.upper()}" in configuration, name
    reference = (site / "reference" / "index.html").read_text()
    assert "ToolContext" in reference and "Runner" in reference
