"""The real fleet across hosts: Redis on one, `toolfleet worker`, `serve` and `run`
processes on others, each host a network namespace (netns.Network).

Every process gets its settings as TOOLFLEET_* variables (what an operator sets on each
machine): the Redis URL names the Redis host's address, so every connection crosses the
test network; PYTHONPATH is this checkout, so the tests' tool modules import.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.hosts.netns import Host, Network
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerProcess, wait_serving
from toolfleet.shared.config import Settings
from toolfleet.shared.pool_kinds import kind_of_pools

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
REDIS_PORT = 6379


def settings_env(settings: Settings) -> dict[str, str]:
    """This process's environment with `settings` as TOOLFLEET_* variables (and no others)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    for name, value in settings.model_dump(mode="json").items():
        if value is None:
            continue
        if isinstance(value, list | dict):
            text = json.dumps(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        env[f"TOOLFLEET_{name.upper()}"] = text
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def start_redis(host: Host, log: Path) -> str:
    """redis-server bound to the host's address only; its URL once it answers."""
    # fmt: off
    host.popen(
        [
            "redis-server", "--bind", host.address, "--port", str(REDIS_PORT),
            "--save", "", "--appendonly", "no", "--protected-mode", "no",
        ],
        env=os.environ,
        log=log,
    )
    # fmt: on
    url = f"redis://{host.address}:{REDIS_PORT}/0"
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        wait_for(answers, START_TIMEOUT_S, f"redis-server on {host.label} ({host.address})")
    finally:
        client.close()
    return url


@dataclass
class HostWorker(WorkerProcess):
    """A `toolfleet worker` process on a host (`ip netns exec` execs it: the pid is the
    worker's own)."""

    host: Host = field(kw_only=True)

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class HostFleet:
    """Processes of one test on the network's hosts, all with `settings` (per role: the
    orchestrators may be given other settings, e.g. a longer result grace)."""

    network: Network
    settings: Settings
    log_dir: Path
    workers: list[HostWorker] = field(default_factory=list)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.settings.require_redis_url())

    def _log(self, host: Host, what: str) -> Path:
        return self.log_dir / f"{host.label}-{what}.log"

    def start_workers(
        self, hosts: list[Host], pools: list[str], concurrency: int, label: str = "w"
    ) -> list[HostWorker]:
        """One `toolfleet worker` per host (booting in parallel); returns once all serve."""
        started = []
        for host in hosts:
            hostname = f"{label}-{host.label}@{host.namespace}"
            log = self._log(host, f"worker-{label}")
            argv = [sys.executable, "-m", "toolfleet", "worker", "-c", str(concurrency)]
            argv += [arg for pool in pools for arg in ("--pool", pool)]
            process = host.popen(
                [*argv, "--name", hostname], env=settings_env(self.settings), log=log, cwd=ROOT
            )
            kind = kind_of_pools(pools, self.settings)
            started.append(HostWorker(hostname, pools, process, log, kind, concurrency, host=host))
        wait_serving(self.settings, started, START_TIMEOUT_S)
        self.workers.extend(started)
        return started

    def toolfleet(self, host: Host, settings: Settings, what: str, *args: str) -> Path:
        """`toolfleet -v args...` on the host; its log."""
        log = self._log(host, what)
        argv = [sys.executable, "-m", "toolfleet", "-v", *args]
        host.popen(argv, env=settings_env(settings), log=log, cwd=ROOT)
        return log

    def serve(self, host: Host, settings: Settings, agent: str, name: str) -> Path:
        """A `toolfleet serve` replica on the host; returns once it serves."""
        log = self.toolfleet(host, settings, f"serve-{name}", "serve", "--agent", agent)
        wait_for(
            lambda: log.exists() and b"toolfleet serve:" in log.read_bytes(),
            START_TIMEOUT_S,
            f"the replica {name} on {host.label}",
        )
        return log

    def run(self, host: Host, settings: Settings, agent: str, session_id: str) -> Path:
        """`toolfleet run --no-wait`: one turn of `session_id`, run by a process on the host."""
        # fmt: off
        return self.toolfleet(
            host, settings, f"run-{session_id}",
            "run", "--agent", agent, "--session", session_id, "--no-wait", "go",
        )
        # fmt: on

    def logs(self) -> str:
        """The tail of every log of the test, for a failure's message."""
        parts = []
        for log in sorted(self.log_dir.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)
