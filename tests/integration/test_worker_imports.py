"""What a worker loads as it starts: not google-genai when its tool modules define only
tools (half a second of every start; tools that keep artifacts, search memory or build
agents import it themselves), and not Celery's whole command line (its other commands'
and plugins' modules) for the one command it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

# The worker's app built as `celery -A toolfleet.workers.app worker` builds it, with the
# modules its start and its intake load; prints whether google-genai was loaded.
PROBE = """
import json, sys
from toolfleet.shared.config import Settings
from toolfleet.workers.app import create_app
create_app(Settings())
import celery.apps.worker, celery.worker.consumer, celery.bin.worker
import toolfleet.workers.intake.intake, toolfleet.workers.tool_runs, toolfleet.workers.command
print(json.dumps({m: m in sys.modules for m in ("google.genai", "celery.bin.celery", "flower")}))
"""


def loaded(redis_url: str, tool_modules: str) -> dict[str, bool]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")},
        "TOOLFLEET_REDIS_URL": redis_url,
        "TOOLFLEET_TOOL_MODULES": tool_modules,
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_worker_of_tool_only_modules_does_not_load_google_genai(redis_url: str) -> None:
    assert not loaded(redis_url, "bench.tools")["google.genai"]


def test_a_module_that_builds_an_agent_loads_it_as_before(redis_url: str) -> None:
    assert loaded(redis_url, "examples.weather")["google.genai"]  # the probe can tell


def test_the_worker_command_leaves_celerys_other_commands_unloaded(redis_url: str) -> None:
    found = loaded(redis_url, "bench.tools")
    assert not found["celery.bin.celery"]
    assert not found["flower"]
