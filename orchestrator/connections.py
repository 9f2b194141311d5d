"""Redis clients for the orchestrator, and stopping the tasks that block on them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

from toolfleet.orchestrator.autopipeline import AutoPipeline, AutoPipelinedRedis
from toolfleet.shared.outages import async_retry_policy
from toolfleet.shared.redis_clients import async_client, async_pool

log = logging.getLogger(__name__)

# redis-py's asyncio pool raises past 100 connections; a blocking pool waits instead.
MAX_CONNECTIONS = 64
# How long a command waits for a free connection under load before it fails.
POOL_WAIT_S = 120


def command_client(url: str, *, autopipeline: bool = True) -> aioredis.Redis:
    """A shared client for short commands (owns its pool and closes it); it retries
    through a short Redis outage (toolfleet.shared.outages). With `autopipeline`, the
    commands of one event-loop iteration share one write (toolfleet.orchestrator.autopipeline)."""
    pool = async_pool(
        url, max_connections=MAX_CONNECTIONS, pool_wait_s=POOL_WAIT_S, retry=async_retry_policy()
    )
    _hiredis_packing(pool)
    if autopipeline and AutoPipeline.supports(url):
        return AutoPipelinedRedis.over(pool, url, async_retry_policy())
    return aioredis.Redis.from_pool(pool)


def blocking_client(url: str) -> aioredis.Redis:
    """A client for one task that blocks in XREAD/XREADGROUP.

    No retries: redis-py can turn a cancelled blocking read into a TimeoutError and
    retry it, swallowing the cancellation; the reading loop handles errors itself.
    """
    # No socket timeout either: an idle XREAD BLOCK is not a dead connection.
    client = async_client(url, retry=Retry(NoBackoff(), 0), socket_timeout=None)
    _hiredis_packing(client.connection_pool)
    return client


def reader_client(url: str, *, autopipeline: bool = True) -> aioredis.Redis:
    """The result reader's client: `blocking_client`, or with `autopipeline` a connection
    of its own read and written without redis-py's per-command layers (a read per result
    or two at 200 sessions). No retries either: the reading loop handles errors."""
    if not (autopipeline and AutoPipeline.supports(url)):
        return blocking_client(url)
    no_retry = Retry(NoBackoff(), 0)
    # The pool is redis-py's client's due; a dedicated client sends nothing through it.
    pool = async_pool(url, retry=no_retry, socket_timeout=None)
    return AutoPipelinedRedis.over(
        pool, url, no_retry, name="toolfleet-results-reader", dedicated=True
    )


class _HiredisPacking:
    """Commands packed by hiredis in C, as redis-py's synchronous connections already do
    (its asyncio ones pack every argument in Python: a fenced session write, ~35
    arguments, took 22 us to pack, 3 us with hiredis)."""

    _packer = HiredisRespSerializer()  # type: ignore[no-untyped-call, unused-ignore]

    def pack_command(self, *args: Any) -> list[bytes]:
        """The command in the Redis protocol (DataError for an argument of another type)."""
        packed: list[bytes] = self._packer.pack(*args)
        return packed


_PACKING: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def _hiredis_packing(pool: aioredis.ConnectionPool) -> aioredis.ConnectionPool:
    """Have the pool's connections pack commands with hiredis, when it is installed and
    the client encodes text as UTF-8 (hiredis's only encoding)."""
    kwargs = pool.connection_kwargs
    utf8 = kwargs.get("encoding", "utf-8") == "utf-8"
    if not HIREDIS_AVAILABLE or not utf8 or kwargs.get("encoding_errors", "strict") != "strict":
        return pool
    base = pool.connection_class
    if base not in _PACKING:
        _PACKING[base] = type(f"Hiredis{base.__name__}", (_HiredisPacking, base), {})
    pool.connection_class = _PACKING[base]
    return pool


async def send_together(client: aioredis.Redis, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """`commands` in one round trip, not a transaction; their replies in order, an error
    reply as the exception in its place. On the auto-pipelined connection the replies
    skip redis-py's response callbacks, so a hash may come as a flat list of fields and
    values or as a dict (`as_hash` reads both), and SET's OK as b"OK" or True."""
    if isinstance(client, AutoPipelinedRedis):
        return await client.send_raw(commands)
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return list(await pipe.execute(raise_on_error=False))


def as_hash(reply: Any) -> dict[Any, Any]:
    """A hash reply (HGETALL) as a dict, from a dict or a flat list of fields and values."""
    if isinstance(reply, dict):
        return reply
    fields = iter(reply)
    return dict(zip(fields, fields, strict=True))


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
