"""A real `celery flower` process with basic auth, for the tests that look at Flower.

Ready once its event receiver is subscribed, which its HTTP server says nothing about.
Flower's own wake-up call to the workers goes out before it subscribes (events are
Redis pub/sub), so the workers are asked for heartbeat events until it lists them:
from then on it receives every task event.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery

from toolfleet.orchestrator.cli.embedded import free_port, wait_for
from toolfleet.shared.config import Settings

Credentials = tuple[str, str]


@dataclass
class Response:
    status: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class Flower:
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    credentials: Credentials

    def get(self, path: str, credentials: Credentials | bool | None = True) -> Response:
        """GET with Flower's own credentials (True), others, or none (None)."""
        login = self.credentials if credentials is True else credentials
        headers = {}
        if isinstance(login, tuple):
            token = base64.b64encode(":".join(login).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            return Response(response.status, response.read().decode(errors="replace"))
        finally:
            conn.close()

    def answers(self, path: str) -> Response | None:
        """The response, or None while nothing listens yet."""
        try:
            return self.get(path)
        except OSError:
            return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running_flower(
    settings: Settings,
    hostnames: Iterable[str],
    log_dir: Path,
    credentials: Credentials,
    start_timeout_s: float,
) -> Iterator[Flower]:
    """Flower on `settings`' broker, once it lists the workers `hostnames`; stopped after."""
    port = free_port()
    env = {
        **os.environ,
        "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
        "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
        "TOOLFLEET_TOOL_MODULES": ",".join(settings.tool_modules),
    }
    env.pop("FLOWER_UNAUTHENTICATED_API", None)  # the API must need the credentials
    command = [
        sys.executable, "-m", "celery", "-A", "toolfleet.workers.app", "flower", f"--port={port}",
        "--address=127.0.0.1", f"--basic-auth={':'.join(credentials)}",
    ]  # fmt: skip
    log_path = log_dir / "flower.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Flower(port, process, log_path, credentials)
    control = Celery("test-flower", broker=settings.require_redis_url(), set_as_current=False)
    expected = set(hostnames)
    try:
        with control.connection_for_write() as conn:

            def sees_workers() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"flower exited at start:\n{server.log()[-3000:]}")
                control.control.broadcast("heartbeat", connection=conn)
                response = server.answers("/api/workers?status=true")
                if response is None or response.status != 200:
                    return False
                return expected <= set(response.json())

            wait_for(sees_workers, start_timeout_s, "flower to see the workers", interval_s=0.2)
        yield server
    finally:
        control.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
