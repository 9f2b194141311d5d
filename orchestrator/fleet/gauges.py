"""The fleet's state as Prometheus gauges, read from Redis when /metrics is scraped."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable

import redis.asyncio as aioredis

from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.metrics import AGE_BANDS, age_band, metrics


async def refresh_fleet_gauges(client: aioredis.Redis, keys: Keys, pools: Iterable[str]) -> None:
    """Set queue depth and live workers per pool (`pools` and those a worker serves),
    pending tickets by age, and the dead-letter count: three round trips."""
    workers = await live_workers(client, keys)
    serving = Counter(pool for worker in workers for pool in worker.pools)
    named = sorted(set(pools) | set(serving))
    pipe = client.pipeline(transaction=False)
    for pool in named:
        pipe.llen(queue_name(pool))
    pipe.xlen(keys.dead_letters())
    pipe.hvals(keys.pending())
    *depths, dead, pending = await pipe.execute()
    recorded = metrics()
    for pool, depth in zip(named, depths, strict=True):
        recorded.queue_depth.labels(pool).set(depth)
        recorded.live_workers.labels(pool).set(serving[pool])
    recorded.dead_letters.set(dead)
    now = time.time()
    ages = Counter(age_band(now - float(json.loads(raw)["created_at"])) for raw in pending)
    for _, band in AGE_BANDS:
        recorded.pending_tickets.labels(band).set(ages[band])
