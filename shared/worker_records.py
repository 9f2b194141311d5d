"""The workers' heartbeat records, read by whoever needs the live workers: the
orchestrator (asyncio) to route a call, a worker (sync) to hand a call of a tool it
lacks on to one that has it.

A record lives in a registry (hostname -> when it lapses, on Redis's clock) and a key of
its own; the registry is read first, so a read costs two round trips however many keys
Redis holds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel, Field

from toolfleet.shared.keys import Keys
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# The most calls a worker's record may say it runs at once, or runs now: far past any
# worker's, and the sum of many still a float a gauge holds (a forged count is not).
MAX_CALLS = 2**31


class WorkerInfo(BaseModel):
    """A worker's heartbeat value: its hostname, the pools it serves, its pid and start time,
    its Celery pool implementation and concurrency (empty and 0 from older workers), the
    tools it can run, its tool modules and how many calls it runs."""

    hostname: str
    pools: list[str]
    pid: int
    started_at: float = Field(allow_inf_nan=False)
    runs: str = ""
    concurrency: int = Field(default=0, ge=0, le=MAX_CALLS)
    # The tools it registered (TOOLFLEET_TOOL_MODULES); None from older workers: any.
    tools: list[str] | None = None
    # Its TOOLFLEET_TOOL_MODULES, and the calls it ran at its last beat (None: not said).
    modules: list[str] | None = None
    busy: int | None = Field(default=None, ge=0, le=MAX_CALLS)
    # The pool of each of its tools (the queue their calls go on); None: not said.
    tool_pools: dict[str, str] | None = None


# KEYS: the workers' registry (hostname -> when its record lapses). The hostnames whose
# record is current, on Redis's clock (the workers' beats score by it: hosts' clocks do
# not matter); the entries of workers that died unannounced are dropped.
_CURRENT = LuaScript(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
"""
)


async def live_workers(client: aioredis.Redis, keys: Keys) -> list[WorkerInfo]:
    """Workers whose heartbeat is current: two round trips, whatever the keyspace holds
    (a SCAN for heartbeat keys cost a turn 40 ms once Redis held ~10^4 keys)."""
    hostnames = await _CURRENT.run(client, 1, keys.workers())
    if not hostnames:
        return []
    names = _names(hostnames)
    values = await client.mget([keys.worker(h) for h in names])
    return _records(names, values)


def live_workers_sync(client: redis.Redis, keys: Keys) -> list[WorkerInfo]:
    """`live_workers` on a synchronous client (a worker's)."""
    hostnames = _CURRENT.run_sync(client, 1, keys.workers())
    if not hostnames:
        return []
    names = _names(hostnames)
    values = client.mget([keys.worker(h) for h in names])
    return _records(names, values)


def _names(hostnames: Sequence[bytes | str]) -> list[str]:
    # A forged member that is not UTF-8 names no worker's key: it reads as no record.
    return [h.decode(errors="replace") if isinstance(h, bytes) else h for h in hostnames]


def _records(names: list[str], values: Sequence[bytes | str | None]) -> list[WorkerInfo]:
    workers = (worker_info(h, v) for h, v in zip(names, values, strict=True))
    return sorted((w for w in workers if w is not None), key=lambda w: w.hostname)


def worker_info(hostname: str, value: bytes | str | None) -> WorkerInfo | None:
    """The worker `hostname`'s record; None when there is none, or it is no record of ours
    (malformed, or forged by whoever can write Redis): logged and skipped, the others
    still count."""
    if value is None:
        return None
    try:
        return WorkerInfo.model_validate(json.loads(value))
    except (ValueError, RecursionError) as exc:  # ValidationError is a ValueError
        log.warning("ignored the malformed heartbeat record of worker %r: %.200s", hostname, exc)
        return None


def tools_of(worker: WorkerInfo, pool: str) -> set[str]:
    """The tools `worker` registered whose calls go on `pool` (all, from a worker that
    does not say which pool each has): its other tools' calls never reach this pool."""
    pools = worker.tool_pools or {}
    return {t for t in worker.tools or () if pools.get(t, pool) == pool}
