"""What waits in a pool's Celery queue: how many messages, and since when the oldest."""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
from kombu.transport.redis import PRIORITY_STEPS, Channel

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
    base = queue_name(pool)
    return [base if step == 0 else f"{base}{Channel.sep}{step}" for step in PRIORITY_STEPS]


def dispatched_at(raw: bytes | str) -> float | None:
    """The `dispatched_at` of the call in a kombu Redis message (a `tool.<name>` task
    whose kwargs hold the call's envelope); None for anything else."""
    try:
        message = json.loads(raw)
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _, kwargs, _ = json.loads(body)
        value = kwargs["call"]["dispatched_at"]
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error):
        return None
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
