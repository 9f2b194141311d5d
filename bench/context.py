"""The sizes of a run, and what the benchmarks of one run share (Redis, settings, workers)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from bench.harness import raw_workers, start_raw, start_toolfleet, toolfleet_workers
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.config import Settings


@dataclass(frozen=True)
class Sizes:
    # 1. per-call overhead: `rounds` alternating rounds of `per_round` calls per path
    overhead_rounds: int = 3
    overhead_per_round: int = 200
    overhead_session_turns: int = 10  # turns per session in the Runner-turn measurement
    # 1b. waiting for a replica: per run, sequential writes of each kind and one-call turns
    replication_writes: int = 2000
    replication_turns: int = 200
    replication_rounds: int = 2  # runs per wait, alternating between the waits
    # 2. fan-out
    fanout_ks: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    fanout_slots: tuple[int, ...] = (8, 16)
    fanout_slots_per_process: int = 8
    fanout_ms: int = 200
    fanout_repeat: int = 3
    # 3. throughput
    tput_sessions: int = 200
    tput_turns: int = 10  # per session: calls = sessions x turns
    tput_processes: tuple[int, ...] = (1, 2)
    tput_concurrency: int = 1  # prefork children per worker process
    tput_rounds: int = 3
    # 3b. both brokers: calls/s of sessions x turns no-op calls on one worker process, and
    # one turn of k calls of io_ms on one io worker, in alternating rounds
    brokers_sessions: int = 100
    brokers_turns: int = 10
    brokers_io_ks: tuple[int, ...] = (100, 1000)
    brokers_rounds: int = 3
    # 4. scale
    scale_sessions: int = 1000
    scale_turns: int = 3
    scale_calls: int = 3
    scale_ms: int = 100
    scale_processes: int = 2
    scale_threads: int = 100  # `-P threads -c N` per worker process
    scale_mem_sessions: int = 200  # a second, traced pass: Python heap per session
    # 5. resume
    resume_n: int = 200
    # 6. ADK
    adk_sync_ms: int = 1000
    adk_async_ms: int = 500
    adk_cpu_s: float = 1.0
    adk_slots: int = 4
    adk_repeat: int = 3
    # 7. io pools
    io_ks: tuple[int, ...] = (10, 100, 1000)
    io_ms: int = 1000
    io_sync_k: int = 200
    io_prefork_max_k: int = 100  # prefork at k=1000 would take minutes (k/4 s)
    io_repeat: int = 3
    # 7b. the embedded default against ADK: one turn of k calls of io_ms, in alternating rounds
    wide_ks: tuple[int, ...] = (1000, 10_000)
    wide_rounds: int = 3
    # 8. MCP: sequential calls per path (in `mcp_rounds` alternating rounds), calls at once
    mcp_calls: int = 400
    mcp_rounds: int = 4
    mcp_concurrency: int = 16
    mcp_parallel_calls: int = 800
    mcp_fresh_calls: int = 5  # direct calls that start a new server each (slow)
    # cost as the work grows (bench/cost.py): two sizes of sessions, two of pending tickets
    cost_sessions: tuple[int, ...] = (1000, 10000)
    cost_turns: int = 2  # per session, four events each
    cost_tickets: tuple[int, ...] = (10000, 100000)
    cost_tickets_per_session: int = 10  # long-running calls in one turn
    cost_completions: int = 10000  # applied at each tickets size
    cost_in_flight: int = 64  # HTTP requests at once, over the two replicas
    cost_posters: int = 8  # threads posting completions
    cost_worker_threads: int = 200  # one io worker process
    cost_settle_s: float = 65.0  # before a memory reading: the 60 s write replies expire
    cost_reference_tasks: int = 10000  # Celery result-backend entries of the reference
    cost_probes: int = 5  # HTTP turns timed at each count of pending tickets

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FULL = Sizes()
SMOKE = Sizes(
    overhead_rounds=2,
    overhead_per_round=10,
    overhead_session_turns=5,
    replication_writes=20,
    replication_turns=5,
    replication_rounds=1,
    fanout_ks=(1, 2, 4),
    fanout_slots=(2,),
    fanout_slots_per_process=2,
    fanout_ms=50,
    fanout_repeat=1,
    tput_sessions=10,
    tput_turns=3,
    tput_processes=(1,),
    tput_rounds=1,
    brokers_sessions=10,
    brokers_turns=3,
    brokers_io_ks=(3, 6),
    brokers_rounds=1,
    scale_sessions=20,
    scale_turns=2,
    scale_calls=3,
    scale_ms=20,
    scale_processes=1,
    scale_threads=20,
    scale_mem_sessions=10,
    resume_n=5,
    adk_sync_ms=200,
    adk_async_ms=100,
    adk_cpu_s=0.2,
    adk_repeat=1,
    io_ks=(10, 50),
    io_ms=200,
    io_sync_k=20,
    io_prefork_max_k=10,
    io_repeat=1,
    wide_ks=(20, 50),
    wide_rounds=1,
    mcp_calls=20,
    mcp_rounds=2,
    mcp_concurrency=4,
    mcp_parallel_calls=40,
    mcp_fresh_calls=2,
    cost_sessions=(20, 60),
    cost_turns=2,
    cost_tickets=(40, 120),
    cost_tickets_per_session=4,
    cost_completions=40,
    cost_in_flight=8,
    cost_posters=2,
    cost_worker_threads=20,
    cost_settle_s=0.0,
    cost_reference_tasks=100,
    cost_probes=2,
)


@dataclass
class Context:
    redis_url: str
    settings: Settings
    sizes: Sizes
    aio: asyncio.Runner
    smoke: bool = False
    adk_python: str | None = None
    shared: dict[str, Any] = field(default_factory=dict)  # figures' results others may use
    _tf: WorkerGroup | None = None
    _raw: WorkerGroup | None = None

    def baseline(self, processes: int, concurrency: int = 1) -> tuple[WorkerGroup, WorkerGroup]:
        """`processes` toolfleet and as many raw Celery worker processes (prefork, -c 1),
        kept between the figures that use the same ones (1, 3, 5)."""
        if self._tf is None or self._raw is None:
            self._tf = toolfleet_workers(self.settings)
            self._raw = raw_workers(self.settings)
        missing = processes - len(self._tf.workers)
        if missing > 0:
            start_toolfleet(self._tf, missing, concurrency, "tf")
            start_raw(self._raw, missing, concurrency)
        return self._tf, self._raw

    def stop_baseline(self) -> None:
        if self._tf is not None:
            self._tf.stop()
            self._tf = None
        if self._raw is not None:
            self._raw.stop()
            self._raw = None

    def redis_memory(self) -> int:
        client = redis.Redis.from_url(self.redis_url)
        try:
            info: Any = client.info("memory")
            return int(info["used_memory"])
        finally:
            client.close()
