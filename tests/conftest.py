"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adk_venv import AdkVenvError, adk_venv


@pytest.fixture(scope="session")
def adk_python() -> Path:
    """The python of `.venv-adk` (google-adk 2.x, google-genai 2.x), built on first use.

    Its first build takes a minute or more: a test that is first to use it wants a
    `pytest.mark.timeout` that allows for that. Where it cannot be built the test is
    skipped with the reason, except under CI=true, where it fails.
    """
    try:
        return adk_venv()
    except AdkVenvError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the ADK virtualenv: {exc}")
        pytest.skip(str(exc))
