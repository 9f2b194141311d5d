"""Which pools have a live worker, from the workers' heartbeat keys (cached briefly)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from pydantic import BaseModel

from toolfleet.orchestrator.connections import decoded
from toolfleet.shared.keys import Keys

# Heartbeats are read at most this often; a turn never pays for a scan of its own.
CACHE_S = 0.5


class WorkerInfo(BaseModel):
    """A worker's heartbeat value: its hostname, the pools it serves, its pid and start time,
    its Celery pool implementation and concurrency (empty and 0 from older workers), the
    tools it can run, its tool modules and how many calls it runs."""

    hostname: str
    pools: list[str]
    pid: int
    started_at: float
    runs: str = ""
    concurrency: int = 0
    # The tools it registered (TOOLFLEET_TOOL_MODULES); None from older workers: any.
    tools: list[str] | None = None
    # Its TOOLFLEET_TOOL_MODULES, and the calls it ran at its last beat (None: not said).
    modules: list[str] | None = None
    busy: int | None = None
    # The pool of each of its tools (the queue their calls go on); None: not said.
    tool_pools: dict[str, str] | None = None


async def live_workers(client: aioredis.Redis, keys: Keys) -> list[WorkerInfo]:
    """Workers whose heartbeat is current: two round trips, whatever the keyspace holds
    (a SCAN for heartbeat keys cost a turn 40 ms once Redis held ~10^4 keys)."""
    now = time.time()
    pipe = client.pipeline(transaction=False)
    pipe.zremrangebyscore(keys.workers(), "-inf", now)  # workers that died unannounced
    pipe.zrangebyscore(keys.workers(), now, "+inf")
    _, hostnames = await pipe.execute()
    if not hostnames:
        return []
    values = await client.mget([keys.worker(decoded(h)) for h in hostnames])
    return sorted(
        (WorkerInfo.model_validate(json.loads(v)) for v in values if v is not None),
        key=lambda w: w.hostname,
    )


@dataclass
class LivePools:
    """The pools served by a live worker, and the tools those workers registered, from the
    heartbeats, cached for CACHE_S seconds."""

    client: aioredis.Redis
    keys: Keys
    _served: frozenset[str] = frozenset()
    _tools: dict[str, frozenset[str] | None] = field(default_factory=dict)  # by pool
    _read_at: float = float("-inf")
    _refreshing: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def served(self) -> frozenset[str]:
        """Names of the pools with at least one live worker (possibly CACHE_S seconds old)."""
        if time.monotonic() - self._read_at > CACHE_S:
            async with self._refreshing:  # one scan per replica, not one per waiting turn
                if time.monotonic() - self._read_at > CACHE_S:
                    workers = await live_workers(self.client, self.keys)
                    self._served = frozenset(p for w in workers for p in w.pools)
                    self._tools = _tools_by_pool(workers)
                    self._read_at = time.monotonic()
        return self._served

    def serves(self, pool: str) -> bool:
        """Whether a live worker served `pool` when `served` last read them."""
        return pool in self._served

    def registered(self, pool: str, tool: str) -> bool:
        """Whether a live worker of `pool`, as `served` last read them, registered `tool`
        (True when one of them does not say: an older worker)."""
        tools = self._tools.get(pool)
        return tools is None or tool in tools

    def forget(self) -> None:
        """Read again on the next call (a pool was missing: maybe a worker just started)."""
        self._read_at = float("-inf")


def _tools_by_pool(workers: list[WorkerInfo]) -> dict[str, frozenset[str] | None]:
    """The tools the live workers of each pool registered together; None for a pool one
    of whose workers does not say which."""
    tools: dict[str, frozenset[str] | None] = {}
    for worker in workers:
        for pool in worker.pools:
            known = tools.get(pool, frozenset())
            if worker.tools is None or known is None:
                tools[pool] = None
            else:
                tools[pool] = known | frozenset(worker.tools)
    return tools
