"""Redis clients for the orchestrator, and stopping the tasks that block on them."""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from toolfleet.shared.outages import async_retry_policy

log = logging.getLogger(__name__)

# redis-py's asyncio pool raises past 100 connections; a blocking pool waits instead.
MAX_CONNECTIONS = 64
# How long a command waits for a free connection under load before it fails.
POOL_WAIT_S = 120


def command_client(url: str) -> aioredis.Redis:
    """A shared client for short commands (owns its pool and closes it); it retries
    through a short Redis outage (toolfleet.shared.outages)."""
    return aioredis.Redis.from_pool(
        aioredis.BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT_S, retry=async_retry_policy()
        )
    )


def blocking_client(url: str) -> aioredis.Redis:
    """A client for one task that blocks in XREAD/XREADGROUP.

    No retries: redis-py can turn a cancelled blocking read into a TimeoutError and
    retry it, swallowing the cancellation; the reading loop handles errors itself.
    """
    # No socket timeout either: an idle XREAD BLOCK is not a dead connection.
    return aioredis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), socket_timeout=None)


def decoded(value: bytes | str) -> str:
    """A Redis reply as text (the clients return bytes)."""
    return value.decode() if isinstance(value, bytes) else value


async def stop_task(task: asyncio.Task[None] | None, timeout_s: float) -> None:
    """Cancel a reader task and wait for it (its loop also checks a stop flag)."""
    if task is None or task.done():
        return
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        log.warning("task %s did not stop within %.1f s", task.get_name(), timeout_s)
    elif not task.cancelled() and task.exception() is not None:
        log.debug("task %s ended with %r", task.get_name(), task.exception())
