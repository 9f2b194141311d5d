"""`toolfleet flower`: Flower on the fleet's Redis, behind a password it prints, listing
the fleet's workers; and a clear error where it cannot start."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from toolfleet.orchestrator.cli.embedded import free_port, wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 30.0
TOOLFLEET = [sys.executable, "-m", "toolfleet"]
OPEN_LINE = re.compile(r"open (http://127\.0\.0\.1:\d+) \(user (\w+), password (\S+)\)")


def get(port: int, path: str, login: tuple[str, str] | None) -> int | None:
    """The status of GET `path`, or None while nothing listens."""
    headers = {}
    if login is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(login).encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=headers)
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


@pytest.fixture
def flower(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[int, subprocess.Popen[str], str]]:
    port = free_port()
    env = {k: v for k, v in orchestrator_env.items() if k != "FLOWER_BASIC_AUTH"}
    with (tmp_path / "flower.log").open("w") as log:
        process = subprocess.Popen(
            [*TOOLFLEET, "flower", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
    assert process.stdout is not None
    try:
        yield port, process, process.stdout.readline()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(15)
        process.stdout.close()


def test_flower_serves_the_fleet_behind_the_password_it_prints(
    flower: tuple[int, subprocess.Popen[str], str], settings: Settings, fleet: WorkerGroup
) -> None:
    port, process, first = flower
    opened = OPEN_LINE.search(first)
    assert opened, first
    assert opened.group(1) == f"http://127.0.0.1:{port}"
    login = (opened.group(2), opened.group(3))
    assert settings.require_redis_url().split("@")[-1] in first  # the fleet's Redis

    hostnames = {w.hostname for w in fleet.workers}
    control = Celery("test-flower-cmd", broker=settings.require_redis_url(), set_as_current=False)
    try:
        with control.connection_for_write() as conn:

            def lists_a_fleet_worker() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"toolfleet flower exited: {process.returncode}")
                control.control.broadcast("heartbeat", connection=conn)
                return bool(hostnames & set(workers_listed(port, login)))

            wait_for(lists_a_fleet_worker, START_TIMEOUT_S, "flower to list a fleet worker", 0.3)
    finally:
        control.close()
    assert get(port, "/api/workers", None) == 401
    assert get(port, "/api/workers", (login[0], "wrong")) == 401


def workers_listed(port: int, login: tuple[str, str]) -> list[str]:
    """The worker names Flower lists, or none while it does not answer yet."""
    token = base64.b64encode(":".join(login).encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/api/workers?status=true", headers={"Authorization": f"Basic {token}"})
        response = conn.getresponse()
        return list(json.loads(response.read())) if response.status == 200 else []
    except OSError:
        return []
    finally:
        conn.close()


def run_flower(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOLFLEET, "flower", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_login_without_a_password_is_refused_saying_so(
    orchestrator_env: dict[str, str],
) -> None:
    done = run_flower(["--basic-auth", "admin"], orchestrator_env)
    assert done.returncode == 2
    assert "--basic-auth takes USER:PASSWORD" in done.stderr
    assert "Traceback" not in done.stderr


def test_no_fleet_to_watch_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    env["TMPDIR"] = str(tmp_path)  # no embedded server's URL published there
    done = run_flower([], env)
    assert done.returncode == 2
    assert "TOOLFLEET_REDIS_URL is not set and no embedded server is running" in done.stderr
    assert "Traceback" not in done.stderr
