"""Orchestrator replicas as `toolfleet serve --http` processes, and users' traffic to
them over HTTP (and through the Python API), for the cost benchmark (bench/cost.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.harness import REPO_ROOT
from toolfleet.orchestrator.cli.embedded import free_port, wait_for
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import SessionKey, session_key

CHAT, TICKETS = "cost_chat", "cost_tickets"
AGENTS = ["bench.cost_agents:chat", "bench.cost_agents:tickets"]
USERS = 100  # sessions are spread over this many users of each app


# ---------------------------------------------------------------- processes


def replica_env(settings: Settings) -> dict[str, str]:
    """The environment of a `toolfleet serve` replica: the run's settings, bench/ importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(
        PYTHONPATH=path,
        TOOLFLEET_REDIS_URL=settings.require_redis_url(),
        TOOLFLEET_KEY_PREFIX=settings.key_prefix,
        TOOLFLEET_TOOL_MODULES=",".join(settings.tool_modules),
        TOOLFLEET_DEFAULT_POOL=settings.default_pool,
        TOOLFLEET_IO_POOLS=",".join(settings.io_pools),
        TOOLFLEET_DEFAULT_TIMEOUT_S=str(settings.default_timeout_s),
        TOOLFLEET_RESULT_GRACE_S=str(settings.result_grace_s),
    )
    return env


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    log: Path
    url: str

    def memory(self) -> dict[str, int]:
        """VmRSS and VmHWM (peak RSS) in bytes, from /proc/<pid>/status."""
        found = {"VmRSS": 0, "VmHWM": 0}
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                name = line.split(":", 1)[0]
                if name in found:
                    found[name] = int(line.split()[1]) * 1024
        return found


@dataclass
class Replicas:
    """`toolfleet serve --http` processes, each on its own port, stopped on exit."""

    settings: Settings
    count: int = 2
    replicas: list[Replica] = field(default_factory=list)
    _dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Replicas:
        self._dir = tempfile.TemporaryDirectory(prefix="toolfleet-bench-replicas-")
        agents = [arg for spec in AGENTS for arg in ("--agent", spec)]
        try:
            for i in range(self.count):
                port = free_port()
                log = Path(self._dir.name) / f"replica{i + 1}.log"
                command = [sys.executable, "-m", "toolfleet", "serve", *agents]
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        [*command, "--http", f"127.0.0.1:{port}"],
                        env=replica_env(self.settings),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                self.replicas.append(Replica(process, log, f"http://127.0.0.1:{port}"))
            for replica in self.replicas:
                wait_for(
                    lambda r=replica: (
                        b"http: http://" in r.log.read_bytes() or r.process.poll() is not None
                    ),
                    60,
                    f"replica {replica.url} to serve",
                )
                if replica.process.poll() is not None:
                    raise ToolfleetError(f"a replica exited at start:\n{replica.log.read_text()}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def memory(self) -> dict[str, int]:
        """VmRSS and VmHWM of all replicas together."""
        readings = [r.memory() for r in self.replicas]
        return {k: sum(m[k] for m in readings) for k in ("VmRSS", "VmHWM")}

    def pids(self) -> list[int]:
        return [r.process.pid for r in self.replicas]

    def __exit__(self, *exc: object) -> None:
        for replica in self.replicas:
            with contextlib.suppress(ProcessLookupError):
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                replica.process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(replica.process.pid, signal.SIGKILL)
                replica.process.wait(5)
        self.replicas.clear()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


# ---------------------------------------------------------------- users' traffic


async def drive(
    replicas: Replicas, app: str, first: int, count: int, messages: Sequence[str], in_flight: int
) -> list[SessionKey]:
    """Create sessions first..first+count of `app` over HTTP, alternating replicas, and
    send each the `messages` in turn, `in_flight` sessions at a time. Raises on any
    answer that is not the expected one (a figure must not measure failures)."""
    gate = asyncio.Semaphore(in_flight)
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    timeout = httpx.Timeout(300.0)
    clients = [
        httpx.AsyncClient(base_url=r.url, limits=limits, timeout=timeout) for r in replicas.replicas
    ]
    keys: list[SessionKey] = []

    async def one(n: int) -> None:
        user, session_id = f"user{n % USERS}", f"{app}-{n}"
        client = clients[n % len(clients)]
        base = f"/apps/{app}/users/{user}/sessions"
        async with gate:
            created = await client.post(base, json={"session_id": session_id})
            if created.status_code != 201:
                raise ToolfleetError(f"create {session_id}: {created.status_code} {created.text}")
            for text in messages:
                answer = await client.post(f"{base}/{session_id}/messages", json={"text": text})
                if answer.status_code != 200 or answer.json().get("error"):
                    raise ToolfleetError(f"{session_id}: {answer.status_code} {answer.text}")
        keys.append(session_key(app, user, session_id))

    try:
        await asyncio.gather(*(one(n) for n in range(first, first + count)))
    finally:
        for client in clients:
            await client.aclose()
    return keys


async def open_tickets(
    runner: Runner, first: int, count: int, message: str, in_flight: int
) -> None:
    """Sessions first..first+count of the tickets agent, each sent `message` through the
    Python API (`Runner.run`), `in_flight` at a time; each turn ends with its calls pending."""
    gate = asyncio.Semaphore(in_flight)

    async def one(n: int) -> None:
        async with gate:
            async for _ in runner.run(user_id=f"user{n % USERS}", session_id=f"{TICKETS}-{n}",
                                      message=message):  # fmt: skip
                pass

    await asyncio.gather(*(one(n) for n in range(first, first + count)))


async def http_turn_s(replica: Replica, label: str, turns: int) -> float:
    """Median seconds of one chat turn over HTTP (a new session each): what a user waits."""
    times: list[float] = []
    async with httpx.AsyncClient(base_url=replica.url, timeout=httpx.Timeout(300.0)) as client:
        for i in range(turns):
            base = f"/apps/{CHAT}/users/probe/sessions"
            session_id = f"probe-{label}-{i}"
            created = await client.post(base, json={"session_id": session_id})
            if created.status_code != 201:
                raise ToolfleetError(f"create {session_id}: {created.status_code} {created.text}")
            started = time.perf_counter()
            answer = await client.post(f"{base}/{session_id}/messages", json={"text": "turn 0"})
            times.append(time.perf_counter() - started)
            if answer.status_code != 200 or answer.json().get("error"):
                raise ToolfleetError(f"{session_id}: {answer.status_code} {answer.text}")
    return statistics.median(times)
