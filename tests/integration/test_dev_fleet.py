"""`toolfleet dev`: the private server, workers and agent kept running in the background, so
the two-terminal approval works in any order: the run may end before the ticket is
approved, and the agent still resumes. `toolfleet dev stop` ends everything it started."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfleet.orchestrator.cli.embedded import wait_for

pytestmark = pytest.mark.integration

AGENT = "examples.reimbursement:agent"
ROOT = Path(__file__).resolve().parents[2]
RESUME_TIMEOUT_S = 60.0
CALL_ID = re.compile(r"\btf-[0-9a-f]+(?:-\S+)?")


def toolfleet(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolfleet", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def listens(url: str) -> bool:
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """No fleet configured; a temporary folder of the test's own holds the state folder."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_"))
    }
    environment["TMPDIR"] = str(tmp_path)
    yield environment
    toolfleet(environment, "dev", "stop")  # whatever the test left running


def test_an_approval_after_the_run_ended_resumes_the_agent(
    env: dict[str, str], tmp_path: Path
) -> None:
    started = toolfleet(env, "dev", "--agent", AGENT)
    assert started.returncode == 0, started.stdout + started.stderr
    url = re.search(r"on (redis://\S+)", started.stdout)
    assert url, started.stdout
    assert listens(url.group(1))
    log = Path(re.search(r"log \(.*\): (\S+)", started.stdout).group(1))  # type: ignore[union-attr]

    again = toolfleet(env, "dev", "--agent", AGENT)
    assert again.returncode == 2 and "a dev fleet is running already" in again.stderr

    ran = toolfleet(env, "run", "--agent", AGENT, "--no-wait", "Please reimburse 200$ for meals")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "embedded server" not in ran.stdout  # it used the dev fleet's

    listed = toolfleet(env, "tickets", "list")
    assert listed.returncode == 0, listed.stderr
    call = CALL_ID.search(listed.stdout)
    assert call, listed.stdout
    approved = toolfleet(env, "tickets", "approve", call.group(0))
    assert approved.returncode == 0, approved.stdout + approved.stderr

    wait_for(
        lambda: "Approved and paid" in log.read_text(),
        RESUME_TIMEOUT_S,
        "the dev fleet's orchestrator to resume the session",
        interval_s=0.2,
    )

    stopped = toolfleet(env, "dev", "stop")
    assert stopped.returncode == 0 and "dev fleet stopped" in stopped.stdout
    assert not listens(url.group(1))
    assert not (tmp_path / f"toolfleet-{os.getuid()}" / "dev.json").exists()
    after = toolfleet(env, "tickets", "list")
    assert after.returncode == 2
    assert "TOOLFLEET_REDIS_URL is not set and no embedded server is running" in after.stderr


def test_a_run_of_an_agent_the_dev_fleet_does_not_serve_says_how_to_fix_it(
    env: dict[str, str],
) -> None:
    started = toolfleet(env, "dev", "--agent", AGENT)
    assert started.returncode == 0, started.stdout + started.stderr
    ran = toolfleet(env, "run", "--agent", "examples.weather:agent", "Weather in Paris?")
    assert ran.returncode == 2
    assert "does not run examples.weather:agent's tools" in ran.stderr
    assert "toolfleet dev --agent examples.weather:agent" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_state_folder_another_user_could_write_is_refused(
    env: dict[str, str], tmp_path: Path
) -> None:
    shared = tmp_path / f"toolfleet-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    (shared / "embedded.url").write_text("redis://127.0.0.1:1/0")
    listed = toolfleet(env, "tickets", "list")
    assert listed.returncode == 2
    assert "is not a private directory of this user" in listed.stderr
