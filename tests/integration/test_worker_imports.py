"""A worker whose tool modules define only tools does not load google-genai (half a
second of every worker's start): only tools that keep artifacts, search memory or build
agents need it, and they import it themselves."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

# The worker's app built as `celery -A toolfleet.workers.app worker` builds it, with the
# modules its start and its intake load; prints whether google-genai was loaded.
PROBE = """
import sys
from toolfleet.shared.config import Settings
from toolfleet.workers.app import create_app
create_app(Settings())
import celery.apps.worker, celery.worker.consumer
import toolfleet.workers.intake.intake, toolfleet.workers.tool_runs
print("google.genai" in sys.modules)
"""


def loads_genai(redis_url: str, tool_modules: str) -> bool:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")},
        "TOOLFLEET_REDIS_URL": redis_url,
        "TOOLFLEET_TOOL_MODULES": tool_modules,
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1] == "True"


def test_a_worker_of_tool_only_modules_does_not_load_google_genai(redis_url: str) -> None:
    assert not loads_genai(redis_url, "bench.tools")


def test_a_module_that_builds_an_agent_loads_it_as_before(redis_url: str) -> None:
    assert loads_genai(redis_url, "examples.weather")  # the probe can tell
