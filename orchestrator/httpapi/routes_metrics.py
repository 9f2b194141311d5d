"""`GET /metrics`: this replica's Prometheus metrics and the fleet's state."""

from __future__ import annotations

from fastapi import APIRouter, Response

from toolfleet.orchestrator.fleet.gauges import refresh_fleet_gauges
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.shared.metrics import metrics


def metrics_router(api: HttpApi) -> APIRouter:
    """The Prometheus scrape endpoint. Like /health it needs no caller identity (Prometheus
    scrapes without one); it holds no session, user or call ids, only tool, pool and model
    names and counts. The access rules of an open API (loopback only) still apply."""
    router = APIRouter()
    pools = sorted(api.tools.needed_pools())
    broker = api.settings.require_broker_url() if api.settings.broker_is_amqp else None

    @router.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        await refresh_fleet_gauges(api.redis, api.keys, pools, broker)
        return Response(generate_latest(metrics().registry), media_type=CONTENT_TYPE_LATEST)

    return router
