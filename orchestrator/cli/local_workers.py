"""Start and stop real `celery worker` processes on this machine.

Used by the embedded default (`toolfleet run`/`demo`) and by the integration tests.
A worker counts as started once its own heartbeat record (its pools, its pid) is in Redis.
Celery's own output goes to the worker's log file; what its tools print goes through two
pipes of their own to this process's stdout and stderr, and to that log (worker_output).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from toolfleet.orchestrator.cli import worker_output
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.worker_output import LinePump
from toolfleet.shared.config import PoolKind, Settings
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.pool_kinds import concurrency_for, kind_of_pools, worker_pool_argv
from toolfleet.shared.redis_clients import sync_client
from toolfleet.workers.tool_output import TOOL_OUTPUT_FDS


@dataclass
class WorkerProcess:
    """One `celery worker` process started by a WorkerGroup, in its own process group;
    `log_path` holds its combined output; `pumps` copy what its tools print to ours."""

    hostname: str
    pools: Sequence[str]
    process: subprocess.Popen[bytes]
    log_path: Path
    kind: PoolKind = "cpu"  # io: Celery's threads pool; cpu: prefork
    concurrency: int = 1  # calls it runs at once: threads (io) or child processes (cpu)
    pumps: list[LinePump] = field(default_factory=list)

    def log(self) -> str:
        """Everything the worker has written so far; empty if it has not written yet."""
        for pump in self.pumps:
            pump.pump()
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        """True while the worker process has not exited."""
        return self.process.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Warm shutdown, then kill the process group if it has not exited within `timeout_s`."""
        self.request_stop()
        self.wait_stopped(timeout_s)

    def request_stop(self) -> None:
        """Warm shutdown: finish the task at hand, remove the heartbeat, exit."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout_s: float) -> None:
        """Wait for the exit; past the timeout, kill the process group (prefork children)."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the whole process group (the prefork children too) and reap the worker."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


# Prefork children of a cpu worker started here unless its spec says otherwise.
CPU_CONCURRENCY = 2


@dataclass(frozen=True)
class WorkerSpec:
    """What to start: one worker serving `pools` running `concurrency` calls at once, named
    `name`@host (default: the pools and a random suffix); a name a live worker holds is
    refused (the start raises ToolfleetError with the worker's log).

    The pools' kind picks the Celery pool: io pools run on threads (`concurrency` threads,
    default the settings' io concurrency), cpu pools on prefork (default 2 processes)."""

    pools: Sequence[str]
    concurrency: int | None = None
    name: str | None = None


@dataclass
class WorkerGroup:
    """Worker processes sharing one set of settings; stops them all on exit."""

    settings: Settings
    extra_env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 30.0
    workers: list[WorkerProcess] = field(default_factory=list)
    _log_dir: tempfile.TemporaryDirectory[str] | None = None

    def start(
        self, pools: Sequence[str], concurrency: int | None = None, name: str | None = None
    ) -> WorkerProcess:
        """Start one worker process and wait until it serves its pools."""
        worker = self._spawn(pools, concurrency, name)
        self._wait_ready(worker)
        return worker

    def start_all(self, specs: Sequence[WorkerSpec]) -> list[WorkerProcess]:
        """Start several workers at once (they boot in parallel), then wait for all."""
        workers = [self._spawn(s.pools, s.concurrency, s.name) for s in specs]
        for worker in workers:
            self._wait_ready(worker)
        return workers

    def _spawn(
        self, pools: Sequence[str], concurrency: int | None, name: str | None
    ) -> WorkerProcess:
        kind = kind_of_pools(pools, self.settings)
        calls = concurrency_for(kind, self.settings, concurrency, CPU_CONCURRENCY)
        if self._log_dir is None:
            self._log_dir = tempfile.TemporaryDirectory(prefix="toolfleet-workers-")
        label = name or f"{'-'.join(pools)}-{uuid.uuid4().hex[:6]}"
        hostname = f"{label}@{socket.gethostname()}"
        log_path = Path(self._log_dir.name) / f"{label}.log"
        env = {
            **os.environ,
            "TOOLFLEET_REDIS_URL": self.settings.require_redis_url(),
            "TOOLFLEET_BROKER_URL": self.settings.broker_url or "",
            "TOOLFLEET_KEY_PREFIX": self.settings.key_prefix,
            "TOOLFLEET_TOOL_MODULES": ",".join(self.settings.tool_modules),
            "TOOLFLEET_DEFAULT_POOL": self.settings.default_pool,
            "TOOLFLEET_IO_POOLS": ",".join(self.settings.io_pools),
            "TOOLFLEET_DEFAULT_IO_POOL": self.settings.default_io_pool,
            "TOOLFLEET_IO_INTAKE": "true" if self.settings.io_intake else "false",
            "TOOLFLEET_IO_THREADS": str(self.settings.io_threads),
            "TOOLFLEET_DEFAULT_TIMEOUT_S": str(self.settings.default_timeout_s),
            "TOOLFLEET_WORKER_HEARTBEAT_S": str(self.settings.worker_heartbeat_s),
            "TOOLFLEET_REDELIVERY_MARGIN_S": str(self.settings.redelivery_margin_s),
            "TOOLFLEET_RESTORE_INTERVAL_S": str(self.settings.restore_interval_s),
            "TOOLFLEET_MAX_DELIVERIES": str(self.settings.max_deliveries),
            "TOOLFLEET_SECRET_ARG_NAMES": ",".join(self.settings.secret_arg_names),
            "TOOLFLEET_CREDENTIAL_KEY": self.settings.credential_key or "",
            "TOOLFLEET_FLEET_KEY": self.settings.fleet_key or "",
            **self.extra_env,
        }
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "toolfleet.workers.app",
            "worker",
            "-Q",
            ",".join(queue_name(p) for p in pools),
            *worker_pool_argv(kind, calls),
            "-n",
            hostname,
            "-E",
            "--loglevel",
            "INFO",
            # Start in ~0.5 s instead of ~2 s: no cluster chatter between our workers.
            "--without-gossip",
            "--without-mingle",  # event heartbeats stay on: Flower shows these workers online
        ]
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        env[TOOL_OUTPUT_FDS] = f"{out_write},{err_write}"
        try:  # append: the pumps add the tools' lines to the same log
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    command,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(out_write, err_write),
                )
        except BaseException:
            os.close(out_read)
            os.close(err_read)
            raise
        finally:  # the worker holds the write ends now: its exit ends the pipes
            os.close(out_write)
            os.close(err_write)
        pumps = [
            LinePump(out_read, worker_output.stdout, log_path),
            LinePump(err_read, worker_output.stderr, log_path),
        ]
        worker = WorkerProcess(hostname, list(pools), process, log_path, kind, calls, pumps)
        self.workers.append(worker)
        return worker

    def _wait_ready(self, worker: WorkerProcess) -> None:
        client = sync_client(self.settings.require_redis_url())
        key = Keys(self.settings.key_prefix).worker(worker.hostname)

        def beats() -> bool:
            # This process's record, not one of a live worker it shares its name with
            # (this one is refused, and exits).
            record = client.get(key)
            return record is not None and json.loads(record).get("pid") == worker.process.pid

        try:
            wait_for(
                lambda: beats() or not worker.alive(),
                self.start_timeout_s,
                f"worker {worker.hostname} to start",
            )
        finally:
            client.close()
        if not worker.alive():
            raise ToolfleetError(
                f"worker {worker.hostname} exited at start:\n{worker.log()[-3000:]}"
            )

    def stop(self) -> None:
        """Stop every worker (warm shutdowns in parallel, each killed after 10 s); delete logs."""
        for worker in self.workers:  # all at once: each warm shutdown takes a second or two
            worker.request_stop()
        for worker in self.workers:
            worker.wait_stopped(10.0)
            for pump in worker.pumps:  # the last lines its tools printed
                pump.stop()
        self.workers.clear()
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
