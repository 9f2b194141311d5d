"""`toolfleet status`: live workers and their pools, queue depths, pending tickets."""

from __future__ import annotations

import argparse
import asyncio
import time

import redis.asyncio as aioredis

from toolfleet.orchestrator.cli.launch import redis_url_or_embedded_file
from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name


async def _status(url: str, keys: Keys) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        workers = await live_workers(client, keys)
        pending = await SessionStore(client, keys).pending_calls()
        pools = sorted({p for w in workers for p in w.pools})
        queued = [await client.llen(queue_name(p)) for p in pools]
    finally:
        await client.aclose()
    now = time.time()
    print(f"redis: {url}")
    print(f"workers: {len(workers)}")
    for w in workers:
        runs = f"{w.runs} x{w.concurrency}" if w.runs else ""
        served = ", ".join(w.pools)
        print(f"  {w.hostname:<36} pools {served:<20} {runs:<14} up {now - w.started_at:,.0f} s")
    print("queues:")
    for pool, depth in zip(pools, queued, strict=True):
        print(f"  {queue_name(pool):<24} {depth} waiting")
    print(f"pending tickets: {len(pending)}")
    for call in pending:
        print(f"  {call.call_id:<24} {call.tool:<28} {now - call.created_at:,.0f} s old")


def cmd_status(args: argparse.Namespace) -> None:
    """`toolfleet status`: print live workers, the queue depth of each pool they serve, and
    pending tickets, from TOOLFLEET_REDIS_URL or the embedded server of a `toolfleet run`."""
    settings = Settings()
    asyncio.run(_status(redis_url_or_embedded_file(settings), Keys(settings.key_prefix)))
