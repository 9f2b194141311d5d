"""`toolfleet status`: live workers and their pools, the tools each pool serves, queue
depths, pending tickets; as text or (--json) as one JSON object."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict
from typing import Any

from toolfleet.orchestrator.cli.launch import redis_url_or_embedded_file
from toolfleet.orchestrator.fleet.pool_view import PoolView, pool_views
from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.orchestrator.fleet.queues import QueueState, broker_queue_states
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.metrics import AGE_BANDS, created_spans
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redis_check import check_redis
from toolfleet.shared.redis_clients import async_client

# Pending tickets `status` lists, the oldest first (`toolfleet tickets list` lists all).
SHOWN_TICKETS = 20


async def _read(url: str, keys: Keys, broker_url: str | None = None) -> dict[str, Any]:
    """The fleet's state as one JSON-ready object; queue depths from RabbitMQ with an
    amqp `broker_url`."""
    client = async_client(url)
    try:
        workers = await live_workers(client, keys)
        tickets = PendingCalls(keys)
        now = time.time()
        by_age = await tickets.acount_created(client, created_spans(now))
        oldest = await tickets.aoldest(client, SHOWN_TICKETS)
        views = pool_views(workers)
        queues = await broker_queue_states(client, [v.pool for v in views], broker_url)
    finally:
        await client.aclose()
    return {
        "redis": url,
        "workers": [
            {**w.model_dump(exclude={"tools", "modules"}), "up_s": round(now - w.started_at, 1)}
            for w in workers
        ],
        "pools": [_pool(view, q) for view, q in zip(views, queues, strict=True)],
        "pending_total": sum(by_age),
        "pending_by_age": {band: n for (_, band), n in zip(AGE_BANDS, by_age, strict=True)},
        "pending": [
            {"call_id": c.call_id, "tool": c.tool, "age_s": round(now - c.created_at, 1)}
            for c in oldest
        ],
    }


def _pool(view: PoolView, queue: QueueState) -> dict[str, Any]:
    age = queue.oldest_age_s
    return {
        "pool": view.pool,
        "queue": queue_name(view.pool),
        "waiting": queue.waiting,
        "oldest_age_s": None if age is None else round(age, 1),
        "workers": view.workers,
        "slots": view.slots,
        "busy": view.busy,
        "tools": {t.name: len(t.workers) for t in view.tools},
        "partial": [asdict(t) for t in view.partial],
        "unlisted": view.unlisted,
    }


def _print(state: dict[str, Any]) -> None:
    print(f"redis: {state['redis']}")
    print(f"workers: {len(state['workers'])}")
    for w in state["workers"]:
        runs = f"{w['runs']} x{w['concurrency']}" if w["runs"] else ""
        served = ", ".join(w["pools"])
        print(f"  {w['hostname']:<36} pools {served:<20} {runs:<14} up {w['up_s']:,.0f} s")
    print("pools:")
    for p in state["pools"]:
        busy = "?" if p["busy"] is None else p["busy"]
        oldest = "" if p["oldest_age_s"] is None else f", oldest {p['oldest_age_s']:,.0f} s"
        print(
            f"  {p['pool']}: {len(p['workers'])} live workers, {busy}/{p['slots']} slots busy, "
            f"{p['waiting']} waiting in {p['queue']}{oldest}"
        )
        for tool, count in p["tools"].items():
            print(f"    {tool:<36} {count} of {len(p['workers'])} workers")
        if p["unlisted"]:
            print(f"    (tools not listed by older workers: {', '.join(p['unlisted'])})")
        for t in p["partial"]:
            modules = " or ".join(t["modules"]) or "the module defining it"
            print(
                f"    ! {t['name']} is missing on {', '.join(t['lacking'])}: add {modules} "
                f"to TOOLFLEET_TOOL_MODULES there"
            )
    total, by_age = state["pending_total"], state["pending_by_age"]
    bands = ", ".join(f"{n} {band}" for band, n in by_age.items() if n)
    print(f"pending tickets: {total}" + (f" ({bands} old)" if bands else ""))
    if total > len(state["pending"]):
        print(f"  the {len(state['pending'])} oldest (all: toolfleet tickets list):")
    for c in state["pending"]:
        print(f"  {c['call_id']:<24} {c['tool']:<28} {c['age_s']:,.0f} s old")


def cmd_status(args: argparse.Namespace) -> None:
    """`toolfleet status`: print live workers, each pool's tools and queue, and pending
    tickets, from TOOLFLEET_REDIS_URL or the embedded server of a `toolfleet run`."""
    settings = Settings()
    url = redis_url_or_embedded_file(settings)
    check_redis(url)
    broker = settings.require_broker_url() if settings.broker_is_amqp else None
    state = asyncio.run(_read(url, Keys(settings.key_prefix), broker))
    if getattr(args, "json", False):
        print(json.dumps(state, indent=2))
    else:
        _print(state)
