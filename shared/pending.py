"""The pending-call records: one Redis hash, call id -> PendingCall JSON.

Every read and write of those records goes through `PendingCalls`. Writes are staged
on the caller's pipeline - a worker's synchronous one, or an orchestrator
transaction - so a record appears or goes in the same step as what makes it true
(the session event that answers the call, the ticket that opens it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import redis
import redis.asyncio as aioredis

from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import PendingCall

# redis-py's synchronous and asyncio pipelines stage commands alike.
Stage = redis.client.Pipeline | aioredis.client.Pipeline


class PendingCalls:
    """Where long-running calls wait for their final result (or a credential)."""

    def __init__(self, keys: Keys) -> None:
        self.key = keys.pending()

    def stage_put(self, pipe: Stage, calls: Iterable[PendingCall]) -> None:
        """Record (or update) `calls` in the caller's transaction."""
        for call in calls:
            pipe.hset(self.key, call.call_id, call.model_dump_json())

    def stage_drop(self, pipe: Stage, call_id: str) -> None:
        """Remove the record of `call_id` in the caller's transaction."""
        pipe.hdel(self.key, call_id)

    def get(self, client: redis.Redis, call_id: str) -> PendingCall | None:
        """The record of `call_id`, or None when it is not pending."""
        return _parsed(client.hget(self.key, call_id))

    def all(self, client: redis.Redis) -> list[PendingCall]:
        """Every pending call, oldest first."""
        return _sorted(client.hgetall(self.key))

    async def aget(self, client: aioredis.Redis, call_id: str) -> PendingCall | None:
        """`get` on an asyncio client."""
        return _parsed(await client.hget(self.key, call_id))

    async def aall(self, client: aioredis.Redis) -> list[PendingCall]:
        """`all` on an asyncio client."""
        return _sorted(await client.hgetall(self.key))


def _parsed(raw: Any) -> PendingCall | None:
    return None if raw is None else PendingCall.model_validate_json(raw)


def _sorted(raw: Mapping[Any, Any]) -> list[PendingCall]:
    calls = [PendingCall.model_validate_json(value) for value in raw.values()]
    return sorted(calls, key=lambda call: call.created_at)
