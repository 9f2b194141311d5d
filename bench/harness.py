"""What every benchmark needs: statistics, the machine, worker processes, loop lag, memory."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import platform
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import redis

from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess, WorkerSpec
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.config import Settings

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
POOL = "bench"
TOOL_MODULES = ["bench.tools"]


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    if not values:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))  # ceil(q/100 * n), at least 1
    return ordered[min(rank, len(ordered)) - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max/mean of a sample of seconds, in milliseconds."""
    return {
        "n": float(len(seconds)),
        "p50": percentile(seconds, 50) * 1000,
        "p95": percentile(seconds, 95) * 1000,
        "p99": percentile(seconds, 99) * 1000,
        "max": max(seconds) * 1000,
        "mean": sum(seconds) / len(seconds) * 1000,
    }


def median(values: Sequence[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    return statistics.median(values)


# ---------------------------------------------------------------- the machine


def machine_info(redis_url: str) -> dict[str, Any]:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    client = redis.Redis.from_url(redis_url)
    try:
        server: Any = client.info("server")
    finally:
        client.close()

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "-"

    mem_total = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_total = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem_total,
        "loadavg_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "redis_server": f"{server.get('redis_version', '?')}"
        + (f" (valkey {server['valkey_version']})" if "valkey_version" in server else ""),
        "celery": version("celery"),
        "kombu": version("kombu"),
        "redis_py": version("redis"),
        "google_genai": version("google-genai"),
        "toolfleet": version("toolfleet"),
    }


# ---------------------------------------------------------------- orchestrator process


def rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


@dataclass
class LoopLag:
    """Sleeps `tick_s` in a loop and records how late each wake-up is; times the garbage
    collector's pauses (a cause of lag that is not our code) and, with `sample_rss`,
    samples RSS (a /proc read per tick: ~20 us, charged to the process measured)."""

    tick_s: float = 0.010
    sample_rss: bool = False
    lags: list[float] = field(default_factory=list)
    peak_rss: int = 0
    gc_pauses: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _gc_started: float = 0.0

    async def __aenter__(self) -> LoopLag:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.create_task(self._run(), name="bench-loop-lag")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        gc.callbacks.remove(self._on_gc)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self.gc_pauses.append(time.perf_counter() - self._gc_started)

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.tick_s)
            self.lags.append(max(0.0, time.perf_counter() - started - self.tick_s))
            if self.sample_rss:
                self.peak_rss = max(self.peak_rss, rss_bytes())

    def stats_ms(self) -> dict[str, float]:
        stats = {"max": 0.0, "p99": 0.0, "p50": 0.0, "gc_max": 0.0, "gc_total": 0.0}
        if self.lags:
            stats["max"] = max(self.lags) * 1000
            stats["p99"] = percentile(self.lags, 99) * 1000
            stats["p50"] = percentile(self.lags, 50) * 1000
        if self.gc_pauses:
            stats["gc_max"] = max(self.gc_pauses) * 1000
            stats["gc_total"] = sum(self.gc_pauses) * 1000
        return stats


class BenchModel(ScriptedModel):
    """ScriptedModel that keeps no history of requests (it would grow with every turn)."""

    async def generate(self, request: ModelRequest) -> Any:
        content = await super().generate(request)
        self.requests.clear()
        return content


# ---------------------------------------------------------------- worker processes


def bench_settings(redis_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        redis_url=redis_url,
        key_prefix=f"tfbench-{uuid.uuid4().hex[:8]}",
        tool_modules=TOOL_MODULES,
        default_pool=POOL,
        default_timeout_s=60.0,
        result_grace_s=5.0,
        worker_heartbeat_s=1.0,
    )
    values.update(overrides)
    return Settings(**values)


def worker_env(pool_impl: str = "prefork") -> dict[str, str]:
    """Environment for worker processes: bench/ importable, and the Celery pool.

    `celery worker` reads its options from CELERY_WORKER_<OPTION> (click's
    auto_envvar_prefix), so CELERY_WORKER_POOL=threads is `-P threads`.
    """
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "CELERY_WORKER_POOL": pool_impl}


def toolfleet_workers(settings: Settings, pool_impl: str = "prefork") -> WorkerGroup:
    """Workers of the bench pool; `threads` makes it an io pool (WorkerGroup picks Celery's
    pool from the pool's kind)."""
    if pool_impl == "threads":
        settings = settings.model_copy(update={"io_pools": [*settings.io_pools, POOL]})
    return WorkerGroup(settings, extra_env=worker_env(pool_impl), start_timeout_s=60.0)


def start_toolfleet(
    group: WorkerGroup, processes: int, concurrency: int, label: str
) -> list[WorkerProcess]:
    base = len(group.workers)
    specs = [
        WorkerSpec([POOL], concurrency, f"{label}{base + i + 1}-{uuid.uuid4().hex[:4]}")
        for i in range(processes)
    ]
    return group.start_all(specs)


def raw_workers(settings: Settings, pool_impl: str = "prefork") -> WorkerGroup:
    """A group for raw Celery's workers (`start_raw`): the same process layout as
    toolfleet's, a longer warm shutdown."""
    return WorkerGroup(
        settings, extra_env=worker_env(pool_impl), start_timeout_s=60.0, stop_timeout_s=15.0
    )


def start_raw(
    group: WorkerGroup, processes: int, concurrency: int, label: str = "raw"
) -> list[WorkerProcess]:
    """`celery -A bench.raw_celery worker` processes with the flags of toolfleet's workers
    (less Celery's event heartbeats), on the group's broker (its settings' `broker_url`,
    else Redis); they boot in parallel, then all are waited for."""
    from bench.raw_celery import QUEUE, READY_KEY

    env = {
        **os.environ,
        "TOOLFLEET_REDIS_URL": group.settings.require_redis_url(),
        "TOOLFLEET_BROKER_URL": group.settings.broker_url or "",
        "TOOLFLEET_KEY_PREFIX": group.settings.key_prefix,
        **group.extra_env,
    }
    started = []
    for _ in range(processes):
        name = f"{label}{len(group.workers) + 1}-{uuid.uuid4().hex[:4]}"
        hostname = f"{name}@{socket.gethostname()}"
        command = [
            sys.executable, "-m", "celery", "-A", "bench.raw_celery", "worker",
            "-Q", QUEUE, "-c", str(concurrency), "-n", hostname, "-E",
            "--loglevel", "INFO", "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip
        started.append(group.launch(command, hostname, env, pools=[QUEUE], concurrency=concurrency))
    with redis.Redis.from_url(group.settings.require_redis_url()) as client:
        for worker in started:
            key = READY_KEY.format(hostname=worker.hostname)
            worker.wait_started(functools.partial(client.exists, key), group.start_timeout_s)
    return started


def in_parallel(*calls: Callable[[], T]) -> list[T]:
    """Run each call on a thread of its own (worker starts and stops mostly wait); their
    results in order. Once all have ended, the first of them (in order) that raised
    raises again."""
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]


def stop_groups(groups: Sequence[WorkerGroup]) -> None:
    """Stop several groups of workers at once: each warm shutdown takes a second or two."""
    in_parallel(*(group.stop for group in groups))


# ---------------------------------------------------------------- where the CPU goes


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of a live process, from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _live_processes() -> dict[int, tuple[int, float]]:
    """Each live process's (parent pid, CPU seconds), by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat
    return found


def tree_cpu_s(roots: Sequence[int]) -> float:
    """CPU seconds of the given processes and all their descendants (prefork children)."""
    live = _live_processes()
    parents = {pid: parent for pid, (parent, _) in live.items()}
    return sum(live[pid][1] for pid in with_descendants(roots, parents) if pid in live)


def child_pids(parent: int) -> list[int]:
    """The live processes whose parent is `parent` (the workers a fleet started)."""
    return [pid for pid, (of, _) in _live_processes().items() if of == parent]


def with_descendants(roots: Sequence[int], parents: Mapping[int, int]) -> set[int]:
    """`roots` and every process below them, given each live process's parent pid."""
    wanted = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in wanted and pid not in wanted:
                wanted.add(pid)
                grew = True
    return wanted


def machine_busy_s() -> float:
    """CPU seconds all cores of the machine spent busy since boot (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / CLOCK_TICKS


def redis_pid(url: str) -> int | None:
    """The Redis server's pid when it runs on this machine (for its CPU time)."""
    client = redis.Redis.from_url(url)
    try:
        info: Any = client.info("server")
    finally:
        client.close()
    pid = int(info.get("process_id", 0))
    return pid if pid and _stat(pid) is not None else None


@dataclass
class CpuMeter:
    """CPU seconds used between start() and stop() by this process, by each group of
    processes (with their children) and by the whole machine: where the time goes on a
    shared machine. "other" is what the machine spent outside all of these."""

    groups: Mapping[str, Sequence[int]]
    start_values: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    _wall: float = 0.0

    def sample(self) -> tuple[dict[str, float], float]:
        """A reading that stop() can use as its end (e.g. taken when the work last moved)."""
        return self._sample(), time.perf_counter()

    def _sample(self) -> dict[str, float]:
        usage = os.times()
        values = {"this process": usage.user + usage.system}
        values.update({name: tree_cpu_s(pids) for name, pids in self.groups.items()})
        values["machine"] = machine_busy_s()
        return values

    def start(self) -> CpuMeter:
        self.start_values = self._sample()
        self._wall = time.perf_counter()
        return self

    def stop(self, at: tuple[dict[str, float], float] | None = None) -> dict[str, float]:
        end, end_wall = at or self.sample()
        self.used = {k: end[k] - self.start_values[k] for k in end}
        known = sum(v for k, v in self.used.items() if k != "machine")
        self.used["other"] = max(0.0, self.used["machine"] - known)
        self.used["wall"] = end_wall - self._wall
        return self.used


def pids(workers: Sequence[WorkerProcess]) -> list[int]:
    return [w.process.pid for w in workers]


def cpu_groups(redis_url: str, **groups: Sequence[WorkerProcess]) -> dict[str, list[int]]:
    found = {name.replace("_", " "): pids(workers) for name, workers in groups.items()}
    server = redis_pid(redis_url)
    if server is not None:
        found["redis"] = [server]
    return found


def median_cpu(rounds: list[dict[str, float]], calls: int) -> dict[str, float]:
    """CPU ms per call of each process group (and the machine's cores busy), the median
    over `rounds` (CpuMeter readings of `calls` calls each)."""
    groups = [g for g in rounds[0] if g not in ("wall", "machine", "other")]
    out = {g: median([r[g] for r in rounds]) / calls * 1000 for g in groups}
    out["cores busy"] = median([r["machine"] / r["wall"] for r in rounds])
    return out


def cpu_note(used: dict[str, float], calls: int) -> str:
    """'this process 1.2 ms, workers 2.0 ms, ... CPU per call' for a table note."""
    parts = [
        f"{name} {seconds / calls * 1000:.2f}"
        for name, seconds in used.items()
        if name not in ("wall", "machine")
    ]
    return ", ".join(parts) + f" (machine {used['machine'] / used['wall']:.2f} cores busy)"
