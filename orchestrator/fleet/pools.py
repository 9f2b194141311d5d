"""Which pools have a live worker, from the workers' heartbeat keys (cached briefly).

While Redis is away (a failover, a restart) no worker can beat, and the records of live
workers lapse: for a while after such an outage, a pool served before it still counts as
served, so a call sent then waits in its queue for the workers coming back instead of
being answered NoWorkerError.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from toolfleet.shared.keys import Keys
from toolfleet.shared.worker_records import WorkerInfo, live_workers

__all__ = ["LivePools", "ToolsByPool", "WorkerInfo", "live_workers"]

log = logging.getLogger(__name__)

# The tools the live workers of each pool registered; None: one of them does not say.
ToolsByPool = dict[str, frozenset[str] | None]

# Heartbeats are read at most this often; a turn never pays for a scan of its own.
CACHE_S = 0.5


def _no_outage() -> float:
    return float("-inf")


@dataclass
class _Sighting:
    """When a read last found a pool served, and the tools its workers had then."""

    at: float  # monotonic
    tools: frozenset[str] | None
    lapsed: bool = False  # counted as served since, its workers' records lapsed


@dataclass
class LivePools:
    """The pools served by a live worker, and the tools those workers registered, from the
    heartbeats, cached for CACHE_S seconds.

    `outage_at()` says when Redis was last seen away (monotonic; the result reader's last
    failed read): for `outage_grace_s` after it, a pool a read found served before then
    counts as served, with its tools of then, until its workers' records are back."""

    client: aioredis.Redis
    keys: Keys
    outage_grace_s: float = 0.0
    outage_at: Callable[[], float] = _no_outage
    _served: frozenset[str] = frozenset()
    _tools: ToolsByPool = field(default_factory=dict)
    _read_at: float = float("-inf")
    _refreshing: asyncio.Lock = field(default_factory=asyncio.Lock)
    _seen: dict[str, _Sighting] = field(default_factory=dict)  # by pool

    async def served(self) -> frozenset[str]:
        """Names of the pools with at least one live worker (possibly CACHE_S seconds old)."""
        if time.monotonic() - self._read_at > CACHE_S:
            async with self._refreshing:  # one scan per replica, not one per waiting turn
                if time.monotonic() - self._read_at > CACHE_S:
                    workers = await live_workers(self.client, self.keys)
                    now = time.monotonic()
                    tools = _tools_by_pool(workers)
                    tools |= self._lapsed(tools, now)
                    self._served = frozenset(tools)
                    self._tools = tools
                    self._read_at = now
        return self._served

    def _lapsed(self, live: ToolsByPool, now: float) -> ToolsByPool:
        """The pools served before the last outage that no live record serves now, while
        its grace lasts, with their tools; any other pool a read no longer finds is
        forgotten (its workers stopped or died with Redis up: NoWorkerError)."""
        outage_at = self.outage_at()
        within_grace = now - outage_at < self.outage_grace_s
        lapsed: ToolsByPool = {}
        for pool, seen in list(self._seen.items()):
            if pool in live:
                continue
            if seen.at <= outage_at and within_grace:
                lapsed[pool] = seen.tools
                if not seen.lapsed:
                    seen.lapsed = True
                    log.info(
                        "pool %s: no worker has beaten since Redis was away; its calls are "
                        "sent for its workers to take once they reach Redis (for %.0f s more)",
                        pool, self.outage_grace_s - (now - outage_at),
                    )  # fmt: skip
            else:
                del self._seen[pool]
        self._seen.update({pool: _Sighting(now, tools) for pool, tools in live.items()})
        return lapsed

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


def _tools_by_pool(workers: list[WorkerInfo]) -> ToolsByPool:
    """The tools the live workers of each pool registered together; None for a pool one
    of whose workers does not say which."""
    tools: ToolsByPool = {}
    for worker in workers:
        for pool in worker.pools:
            known = tools.get(pool, frozenset())
            if worker.tools is None or known is None:
                tools[pool] = None
            else:
                tools[pool] = known | frozenset(worker.tools)
    return tools
