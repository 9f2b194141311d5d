"""The two servers the ADK web tests run against, each serving the desk app
(tests/integration/adk_web_apps): `toolfleet serve --http` with real worker processes
(ADK's routes under /adk, its dev UI at /adk/dev-ui/), and ADK's own `adk web`.

Both run on the ADK virtualenv's Python (google-adk for the dev UI and for ADK itself);
toolfleet's workers run on this one. Each server has what it writes to itself: a
private Redis for toolfleet (its queues are not prefixed: the shared test fleet's
workers must not take the desk's calls), a private HOME for ADK (where its dev UI's
telemetry choice is written), and logs in a temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.adk_venv import REPO_ROOT, clean_env
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis, free_port, wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.config import Settings
from toolfleet.shared.signing import new_fleet_key

DESK_MODULE = "tests.integration.adk_web_apps.desk.agent"
APPS = REPO_ROOT / "tests" / "integration" / "adk_web_apps"
REFERENCE = REPO_ROOT / "tests" / "integration" / "adk_web_reference.py"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15
LOG_TAIL_CHARS = 3000
# What the reference server may write into the apps' folders (nothing, with memory://
# services): removed if it appears, and reported by `new_files`.
ADK_FOLDER = ".adk"


@dataclass(frozen=True)
class Served:
    """A server of the desk app.

    Attributes:
        kind: "toolfleet" or "adk".
        base_url: Where ADK's routes are (ADK's clients' base URL).
        dev_ui: The dev UI's address.
    """

    kind: str
    base_url: str
    dev_ui: str


def desk_settings(redis_url: str) -> Settings:
    """The settings of toolfleet's side: the desk's tools, on `redis_url`, keys of their own."""
    return Settings(
        redis_url=redis_url,
        key_prefix=f"tfadkweb-{uuid.uuid4().hex[:8]}",
        tool_modules=[DESK_MODULE],
        default_timeout_s=10,
        worker_heartbeat_s=0.5,
        credential_key=new_credential_key(),
        fleet_key=new_fleet_key(),
    )


def server_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment for the ADK virtualenv's Python: less this virtualenv's settings,
    toolfleet's settings and model keys (the desk's model is a script), plus `extra`."""
    dropped = ("TOOLFLEET_", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_")
    env = {k: v for k, v in clean_env().items() if not k.startswith(dropped)}
    return {**env, **extra}


@contextlib.contextmanager
def toolfleet_server(python: Path, logs: Path) -> Iterator[Served]:
    """`toolfleet serve --http` on `python`, a private Redis, and a worker on each of the
    desk's pools (default: its plain tools, io: its async one)."""
    with EmbeddedRedis() as redis_server:
        settings = desk_settings(redis_server.url)
        with WorkerGroup(settings) as workers:
            workers.start_all([WorkerSpec(["default"], 1), WorkerSpec(["io"], 4)])
            env = server_env(
                {
                    "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
                    "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
                    "TOOLFLEET_TOOL_MODULES": DESK_MODULE,
                    "TOOLFLEET_FLEET_KEY": settings.fleet_key or "",
                    "TOOLFLEET_CREDENTIAL_KEY": settings.credential_key or "",
                }
            )
            port = free_port()
            command = [
                str(python), "-m", "toolfleet", "serve", "--http", f"127.0.0.1:{port}",
                "--agent", f"{DESK_MODULE}:root_agent",
            ]  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            with running(command, env, logs / "toolfleet-serve.log", f"{base}/adk/health"):
                yield Served("toolfleet", f"{base}/adk", f"{base}/adk/dev-ui/")


@contextlib.contextmanager
def adk_server(python: Path, logs: Path, home: Path) -> Iterator[Served]:
    """ADK's own `adk web` on the desk app (its api_server routes and its dev UI), its
    sessions and artifacts in memory, its HOME at `home`."""
    port = free_port()
    command = [
        str(python), str(REFERENCE), "web",
        "--host", "127.0.0.1", "--port", str(port),
        "--session_service_uri", "memory://", "--artifact_service_uri", "memory://",
    ]  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    env = server_env({"HOME": str(home)})
    base = f"http://127.0.0.1:{port}"
    before = adk_folders()
    try:
        with running(command, env, logs / "adk-web.log", f"{base}/health"):
            yield Served("adk", base, f"{base}/dev-ui/")
    finally:
        for folder in adk_folders() - before:
            shutil.rmtree(folder, ignore_errors=True)


def adk_folders() -> set[Path]:
    """The `.adk` folders under the apps' folder (ADK's local session and eval storage)."""
    return set(APPS.rglob(ADK_FOLDER))


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], log: Path, health: str) -> Iterator[None]:
    """Run `command` until the block ends, ready once `health` answers 200; stopped with
    SIGTERM (its process group killed if it lingers). Its output goes to `log`, whose
    tail is in the failure when it does not start."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its children (uvicorn's) go with it
        )  # fmt: skip
    try:
        try:
            wait_for(lambda: process.poll() is not None or answers(health), START_TIMEOUT_S, health)
        except Exception as exc:
            raise AssertionError(f"{command[1:4]} did not start: {exc}\n{tail(log)}") from exc
        assert process.poll() is None, f"{command[1:4]} exited {process.returncode}:\n{tail(log)}"
        yield
    finally:
        stop(process)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the group we started, by its id
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-LOG_TAIL_CHARS:] if log.exists() else "(no output)"
