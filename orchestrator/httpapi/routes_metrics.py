"""`GET /metrics`: this replica's Prometheus metrics and the fleet's state."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response

from toolfleet.orchestrator.fleet import gauges
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.shared.metrics import metrics


def metrics_router(api: HttpApi) -> APIRouter:
    """The Prometheus scrape endpoint. Like /health it needs no caller identity (Prometheus
    scrapes without one); it holds no session, user or call ids, only tool, pool and model
    names and counts. The access rules of an open API (loopback only) still apply."""
    router = APIRouter()
    pools = sorted(api.tools.needed_pools())
    broker = api.settings.require_broker_url() if api.settings.broker_is_amqp else None
    reading: asyncio.Task[None] | None = None

    async def refreshed() -> None:
        """The fleet's gauges read afresh, by one read at a time: a scrape that comes while
        one runs waits for it, so that scrapes, which anyone may send, never hold more
        than one set of Redis (or RabbitMQ) reads and one of the threads they share."""
        nonlocal reading
        if reading is None or reading.done():
            reading = asyncio.create_task(
                gauges.refresh_fleet_gauges(api.redis, api.keys, pools, broker)
            )
        await asyncio.shield(reading)  # a scrape that goes away leaves it to the others

    @router.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        await refreshed()
        return Response(generate_latest(metrics().registry), media_type=CONTENT_TYPE_LATEST)

    return router
