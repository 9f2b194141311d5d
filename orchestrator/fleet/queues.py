"""What waits in a pool's Celery queue: how many messages, and since when the oldest."""

from __future__ import annotations

import asyncio
import binascii
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from toolfleet.shared.call_signing import CALL_FIELD, call_fields
from toolfleet.shared.celery_wire.layout import PRIORITY_STEPS, priority_lists
from toolfleet.shared.celery_wire.parse import task_kwargs
from toolfleet.shared.keys import queue_name


@dataclass(frozen=True)
class QueueState:
    """A pool's queue now: messages waiting, and the age in seconds of the oldest one
    (None when none waits or its call carries no dispatch time)."""

    pool: str
    waiting: int
    oldest_age_s: float | None


def priority_queues(pool: str) -> list[str]:
    """The Redis lists kombu keeps for the pool's queue: `tools.<pool>` for priority 0
    (every call the orchestrator sends), and one more for each other priority step."""
    return priority_lists(queue_name(pool))


def dispatched_at(raw: bytes | str) -> float | None:
    """The `dispatched_at` of the call in a kombu Redis message (a `tool.<name>` task
    whose kwargs hold the call's envelope); None for anything else."""
    try:
        value = call_fields(task_kwargs(raw)[CALL_FIELD])["dispatched_at"]
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error, RecursionError):
        return None  # RecursionError: JSON nested past the parser's depth (a forgery)
    # A forged or broken message's time (NaN, infinite, a bool) is no time at all.
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


async def queue_states(client: aioredis.Redis, pools: Sequence[str]) -> list[QueueState]:
    """The state of each pool's queue, in one round trip: a length and the tail message
    (the next one a worker takes, the oldest: the orchestrator pushes on the left and
    workers pop on the right) of each priority list."""
    pipe = client.pipeline(transaction=False)
    for pool in pools:
        for queue in priority_queues(pool):
            pipe.llen(queue)
            pipe.lindex(queue, -1)
    replies = await pipe.execute()
    now = time.time()
    states = []
    per_pool = 2 * len(PRIORITY_STEPS)
    for i, pool in enumerate(pools):
        mine = replies[i * per_pool : (i + 1) * per_pool]
        waiting = sum(int(n) for n in mine[0::2])
        tails = [dispatched_at(raw) for raw in mine[1::2] if raw is not None]
        sent = [t for t in tails if t is not None]
        oldest = max(0.0, now - min(sent)) if sent else None
        states.append(QueueState(pool, waiting, oldest))
    return states


# How long reading RabbitMQ's queue depths may wait for the broker.
AMQP_DEPTH_TIMEOUT_S = 5.0


async def broker_queue_states(
    client: aioredis.Redis, pools: Sequence[str], broker_url: str | None = None
) -> list[QueueState]:
    """`queue_states` of the queues where they are: Redis lists, or RabbitMQ's queues for
    an amqp `broker_url` (see amqp_queue_states)."""
    if broker_url is None:
        return await queue_states(client, pools)
    return await asyncio.to_thread(amqp_queue_states, broker_url, pools)


def amqp_queue_states(broker_url: str, pools: Sequence[str]) -> list[QueueState]:
    """The pools' queues on RabbitMQ: the messages ready in each (a passive declare; those
    delivered and not yet acknowledged are not counted), 0 for a queue not declared yet.
    The age of the oldest is not known there (None)."""
    from toolfleet.shared.celery_wire.rabbitmq import queue_depths  # RabbitMQ's fleets only

    queues = [queue_name(pool) for pool in pools]
    depths = queue_depths(broker_url, queues, AMQP_DEPTH_TIMEOUT_S)
    return [QueueState(pool, waiting, None) for pool, waiting in zip(pools, depths, strict=True)]
