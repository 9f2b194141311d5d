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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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

    def wait_started(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Wait until `ready()` says the worker serves, or until it exits.

        Args:
            ready: whether the worker serves now (its heartbeat record is there, say).
            timeout_s: how long its start may take.

        Raises:
            ToolfleetError: the worker exited first (the message ends with its log), or
                `timeout_s` passed.
        """
        wait_for(lambda: ready() or not self.alive(), timeout_s, f"worker {self.hostname} to start")
        if not self.alive():
            raise ToolfleetError(f"worker {self.hostname} exited at start:\n{self.log()[-3000:]}")


def wait_serving(settings: Settings, workers: Sequence[WorkerProcess], timeout_s: float) -> None:
    """Wait until each worker's own heartbeat record is in the settings' Redis.

    A record counts when it names the worker's pid: a worker refused a name that a live
    worker holds exits, and the record there is the other's.

    Args:
        settings: the workers' settings (their Redis and key prefix).
        workers: the `toolfleet worker` or `celery worker` processes to wait for.
        timeout_s: how long each worker's start may take.

    Raises:
        ToolfleetError: a worker exited at start, or did not beat within `timeout_s`.
    """
    client = sync_client(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    try:
        for worker in workers:

            def beats(w: WorkerProcess = worker) -> bool:
                record = client.get(keys.worker(w.hostname))
                return record is not None and json.loads(record).get("pid") == w.process.pid

            worker.wait_started(beats, timeout_s)
    finally:
        client.close()


# Prefork children of a cpu worker started here unless its spec says otherwise.
CPU_CONCURRENCY = 2

# Settings a worker does not take from the group's: where it serves its metrics (each
# process binds an address of its own; the environment's, if any, still passes).
NOT_FOR_WORKERS = frozenset({"worker_metrics_bind"})
# The settings a worker started here gets from the group's, whatever this process's
# environment says: all of them, as a worker reads many (the Redis wait, the payload
# limits) and runs agent tools' loops, which read the orchestrator's too.
WORKER_SETTINGS = tuple(name for name in Settings.model_fields if name not in NOT_FOR_WORKERS)


def setting_text(value: object) -> str:
    """A setting's value as its TOOLFLEET_* variable says it (Settings reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value)  # a list's items may hold commas
    return str(value)


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
    """Worker processes sharing one set of settings, each with a log file of its own;
    stops them all on exit (a warm shutdown, then a kill past `stop_timeout_s`)."""

    settings: Settings
    extra_env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 30.0
    stop_timeout_s: float = 10.0
    workers: list[WorkerProcess] = field(default_factory=list)
    _log_dir: tempfile.TemporaryDirectory[str] | None = None

    def start(
        self, pools: Sequence[str], concurrency: int | None = None, name: str | None = None
    ) -> WorkerProcess:
        """Start one worker process and wait until it serves its pools.

        Args:
            pools: the pools it serves.
            concurrency: calls it runs at once (default: see WorkerSpec).
            name: its node name before the @ (default: the pools and a random suffix).

        Returns:
            The worker, serving.

        Raises:
            ToolfleetError: it exited at start (its name is held, say), or did not start
                within `start_timeout_s`.
        """
        (worker,) = self.start_all([WorkerSpec(pools, concurrency, name)])
        return worker

    def start_all(self, specs: Sequence[WorkerSpec]) -> list[WorkerProcess]:
        """Start several workers at once (they boot in parallel), then wait for all.

        Args:
            specs: what to start.

        Returns:
            The workers, in the order of `specs`, all serving.

        Raises:
            ToolfleetError: one exited at start, or did not start within `start_timeout_s`.
        """
        workers = [self._spawn(spec) for spec in specs]
        wait_serving(self.settings, workers, self.start_timeout_s)
        return workers

    def environment(self) -> dict[str, str]:
        """A worker process's environment: this process's, every setting a worker reads
        as its TOOLFLEET_* variable (WORKER_SETTINGS; one that is None unset), then
        `extra_env`."""
        self.settings.require_redis_url()
        env = dict(os.environ)
        for name in WORKER_SETTINGS:
            variable = f"TOOLFLEET_{name.upper()}"
            value = getattr(self.settings, name)
            if value is None:
                env.pop(variable, None)
            else:
                env[variable] = setting_text(value)
        return {**env, **self.extra_env}

    def _spawn(self, spec: WorkerSpec) -> WorkerProcess:
        kind = kind_of_pools(spec.pools, self.settings)
        calls = concurrency_for(kind, self.settings, spec.concurrency, CPU_CONCURRENCY)
        label = spec.name or f"{'-'.join(spec.pools)}-{uuid.uuid4().hex[:6]}"
        hostname = f"{label}@{socket.gethostname()}"
        command = [
            sys.executable,
            "-m",
            "toolfleet.workers.command",  # `celery -A toolfleet.workers.app worker`, lighter
            "-Q",
            ",".join(queue_name(p) for p in spec.pools),
            *worker_pool_argv(kind, calls),
            "-n",
            hostname,
            "--loglevel",
            "INFO",
            # Start in ~0.5 s instead of ~2 s: no cluster chatter between our workers.
            "--without-gossip",
            "--without-mingle",  # event heartbeats stay on: Flower shows these workers online
        ]
        return self.launch(
            command,
            hostname,
            self.environment(),
            pools=spec.pools,
            kind=kind,
            concurrency=calls,
            tool_output=True,
        )

    def launch(
        self,
        command: Sequence[str],
        hostname: str,
        env: Mapping[str, str],
        *,
        pools: Sequence[str] = (),
        kind: PoolKind = "cpu",
        concurrency: int = 1,
        tool_output: bool = False,
    ) -> WorkerProcess:
        """Start `command`, a worker process named `hostname`, as one of the group's,
        without waiting for it to serve (`WorkerProcess.wait_started` waits).

        It runs in a process group of its own (a kill takes its pool too); Celery's
        output goes to `<name before the @>.log` in the group's log folder.

        Args:
            command: the argv, `celery ... worker -n hostname ...` or the like.
            hostname: its node name, for messages and its log file's name.
            env: its whole environment (`environment()` is a toolfleet worker's).
            pools: the pools (or queues) it serves.
            kind: the kind of its pools.
            concurrency: calls it runs at once.
            tool_output: give it the two pipes a toolfleet worker's tools print into,
                copied to this process's stdout and stderr and to its log.

        Returns:
            The started process.
        """
        if self._log_dir is None:
            self._log_dir = tempfile.TemporaryDirectory(prefix="toolfleet-workers-")
        log_path = Path(self._log_dir.name) / f"{hostname.partition('@')[0]}.log"
        env = dict(env)
        reads: tuple[int, ...] = ()
        writes: tuple[int, ...] = ()
        if tool_output:
            (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
            reads, writes = (out_read, err_read), (out_write, err_write)
            env[TOOL_OUTPUT_FDS] = f"{out_write},{err_write}"
        try:  # append: the pumps add the tools' lines to the same log
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    command,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=writes,
                )
        except BaseException:
            for fd in reads:
                os.close(fd)
            raise
        finally:  # the worker holds the write ends now: its exit ends the pipes
            for fd in writes:
                os.close(fd)
        pumps = []
        if tool_output:
            pumps = [
                LinePump(reads[0], worker_output.stdout, log_path),
                LinePump(reads[1], worker_output.stderr, log_path),
            ]
        worker = WorkerProcess(hostname, list(pools), process, log_path, kind, concurrency, pumps)
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        """Stop every worker (warm shutdowns in parallel, each killed past
        `stop_timeout_s`); delete their logs."""
        for worker in self.workers:  # all at once: each warm shutdown takes a second or two
            worker.request_stop()
        for worker in self.workers:
            worker.wait_stopped(self.stop_timeout_s)
            for pump in worker.pumps:  # the last lines its tools printed
                pump.stop()
        self.workers.clear()
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
