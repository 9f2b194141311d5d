"""The fleet's state as Prometheus gauges, read from Redis when /metrics is scraped."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import redis.asyncio as aioredis

from toolfleet.orchestrator.fleet.pool_view import pool_views
from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.orchestrator.fleet.queues import broker_queue_states
from toolfleet.shared.keys import Keys
from toolfleet.shared.metrics import AGE_BANDS, created_spans, metrics
from toolfleet.shared.pending import PendingCalls

if TYPE_CHECKING:
    from prometheus_client import Gauge


async def refresh_fleet_gauges(
    client: aioredis.Redis, keys: Keys, pools: Iterable[str], broker_url: str | None = None
) -> None:
    """Set, per pool (`pools` and those a worker serves), the calls waiting in its queue
    and the age of the oldest, its live workers, their slots and the calls they run; the
    pending tickets by age (counted in their age index, no record read), and the
    dead-letter count: five round trips, whatever the queues and tickets hold (one length
    and one message per priority list of each pool)."""
    workers = await live_workers(client, keys)
    views = {view.pool: view for view in pool_views(workers)}
    recorded = metrics()
    # A pool set before stays: once its last worker is gone it shows none, not its last.
    named = sorted(set(pools) | set(views) | _exported(recorded.live_workers))
    queues = await broker_queue_states(client, named, broker_url)
    dead = await client.xlen(keys.dead_letters())
    now = time.time()
    by_age = await PendingCalls(keys).acount_created(client, created_spans(now))
    for queue in queues:
        view = views.get(queue.pool)
        recorded.queue_depth.labels(queue.pool).set(queue.waiting)
        recorded.queue_oldest_age.labels(queue.pool).set(queue.oldest_age_s or 0.0)
        recorded.live_workers.labels(queue.pool).set(len(view.workers) if view else 0)
        recorded.slots.labels(queue.pool).set(view.slots if view else 0)
        recorded.slots_busy.labels(queue.pool).set((view.busy or 0) if view else 0)
    recorded.dead_letters.set(dead)
    for (_, band), count in zip(AGE_BANDS, by_age, strict=True):
        recorded.pending_tickets.labels(band).set(count)


def _exported(gauge: Gauge) -> set[str]:
    """The pools `gauge` has a value for."""
    return {sample.labels["pool"] for family in gauge.collect() for sample in family.samples}
