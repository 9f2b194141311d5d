"""toolfleet.adk's table of ADK's modules, held to google-adk's own modules: each name it
lists is where ADK has it (from the release that added it there on), and none of
toolfleet.adk's names that ADK's module has is left out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.adk_venv import BUILD_TIMEOUT_S, REPO_ROOT, clean_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(BUILD_TIMEOUT_S + 300)]

# Run by the ADK virtualenv's interpreter, with this checkout's toolfleet first on the path.
COMPARE = """
import importlib, json, sys, types, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
import google.adk
import toolfleet.adk
from toolfleet.orchestrator.adk.module_paths import (
    ADDED_IN, ALIASES, NEED_ADK_EXTRAS, adk_module_names,
)

release = tuple(int(part) for part in google.adk.__version__.split(".")[:2])
ours = set(toolfleet.adk.__all__) | set(ALIASES)
not_in_adk, left_out = [], []
for module, names in adk_module_names().items():
    try:
        adk = importlib.import_module(f"google.adk.{module}")
    except ImportError:
        adk = None
    def has(name):
        try:
            return adk is not None and hasattr(adk, name)
        except ImportError:  # a name ADK loads from an extra it does not have here
            return False
    wanted = [
        n for n in names
        if (module, n) not in NEED_ADK_EXTRAS and release >= ADDED_IN.get((module, n), (0, 0))
    ]
    not_in_adk += [f"{module}.{n}" for n in wanted if not has(n)]
    # A module below it (`google.adk.tools.load_memory_tool`) is one of the table's own.
    left_out += [
        f"{module}.{n}" for n in sorted(ours - names)
        if has(n) and not isinstance(getattr(adk, n), types.ModuleType)
    ]
print(json.dumps({"not_in_adk": not_in_adk, "left_out": left_out}))
"""


def test_the_table_of_adks_modules_matches_google_adk(adk_python: Path) -> None:
    done = subprocess.run(
        [str(adk_python), "-c", COMPARE, str(REPO_ROOT)],
        cwd=REPO_ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"not_in_adk": [], "left_out": []}
