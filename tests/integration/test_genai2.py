"""toolfleet on google-genai 2.x: the unit suite, run by the ADK virtualenv's interpreter.

The dev virtualenv has google-genai 3; google-adk 2.x pins it below 3, so `serve --http`
with ADK's dev UI runs toolfleet on 2.x. Both must pass the same unit tests.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.adk_venv import BUILD_TIMEOUT_S, REPO_ROOT, VERSIONS_SCRIPT, clean_env

UNIT_SUITE_TIMEOUT_S = 600
OUTPUT_TAIL_CHARS = 6000

pytestmark = [
    pytest.mark.integration,
    # The first test to ask for `adk_python` builds the virtualenv (about a minute).
    pytest.mark.timeout(BUILD_TIMEOUT_S + UNIT_SUITE_TIMEOUT_S + 60),
]


def test_the_adk_venv_has_google_genai_2_and_imports_adk(adk_python: Path) -> None:
    done = subprocess.run(
        [str(adk_python), "-c", VERSIONS_SCRIPT],
        cwd=REPO_ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-OUTPUT_TAIL_CHARS:]
    genai_version, adk_version = done.stdout.split()
    assert genai_version.split(".")[0] == "2", genai_version
    assert adk_version.split(".")[0] == "2", adk_version


def test_the_unit_suite_passes_on_google_genai_2(adk_python: Path) -> None:
    command = [str(adk_python), "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=UNIT_SUITE_TIMEOUT_S,
        check=False,
    )
    tail = (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]
    if done.returncode != 0:
        print(tail)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{tail}"
    assert " passed" in tail, tail
