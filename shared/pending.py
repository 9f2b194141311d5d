"""The pending-call records: one Redis hash, call id -> PendingCall JSON.

Every read and write of those records goes through `PendingCalls`. Writes are staged
on the caller's WriteBatch, so a record appears or goes in the same step as what makes
it true (the session event that answers the call). A worker opens a ticket only for a
call that is not closed, checked in the same step (`open`).

Records are stored with secret-named values masked at any depth; sealed arguments are
kept (a credential request's call is sent again from its record).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import redis
import redis.asyncio as aioredis

from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, redact_deep, secret_name_set
from toolfleet.shared.scripts import LuaScript

# A closed call's marker outlives any redelivery or late post of it, then goes.
CLOSED_TTL_S = 7 * 24 * 3600

# KEYS: closed marker, pending hash. ARGV: call id, record. 1 if recorded, 0 if closed.
_OPEN_LUA = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
return 1
"""
_OPEN = LuaScript(_OPEN_LUA)


class PendingCalls:
    """Where long-running calls wait for their final result (or a credential)."""

    def __init__(self, keys: Keys, secret_names: Iterable[str] = DEFAULT_SECRET_NAMES) -> None:
        self.key = keys.pending()
        self._keys = keys
        self._secrets = secret_name_set(secret_names)

    def record(self, call: PendingCall) -> str:
        """The JSON stored for `call`: secret-named values masked, sealed arguments kept."""
        secrets = self._secrets
        update = {
            "args": redact_deep(call.args, secrets, keep_sealed=True),
            "ticket": redact_deep(call.ticket, secrets),
            "progress": redact_deep(call.progress, secrets),
        }
        if call.envelope is not None:
            envelope = call.envelope
            update["envelope"] = envelope.model_copy(
                update={
                    "args": redact_deep(envelope.args, secrets, keep_sealed=True),
                    "state": redact_deep(envelope.state, secrets, keep_sealed=True),
                }
            )
        return call.model_copy(update=update).model_dump_json()

    def stage_put(self, batch: WriteBatch, calls: Iterable[PendingCall]) -> None:
        """Record (or update) `calls` in the caller's atomic step."""
        for call in calls:
            batch.hset(self.key, call.call_id, self.record(call))

    def stage_drop(self, batch: WriteBatch, *call_ids: str) -> None:
        """Remove the records of `call_ids` in the caller's atomic step."""
        if call_ids:
            batch.hdel(self.key, *call_ids)

    def open(self, client: redis.Redis, call: PendingCall) -> bool:
        """Record a ticket for `call` unless the orchestrator closed the call already
        (it timed out, say): then False, and the call must not run."""
        closed = self._keys.closed(call.session_key, call.call_id)
        opened = _OPEN.run_sync(client, 2, closed, self.key, call.call_id, self.record(call))
        return bool(opened)

    def is_closed(self, client: redis.Redis, session: SessionKey, call_id: str) -> bool:
        """Whether the orchestrator gave the call its final answer already."""
        return bool(client.exists(self._keys.closed(session, call_id)))

    def stage_close(self, batch: WriteBatch, session: SessionKey, call_ids: Iterable[str]) -> None:
        """Close calls in the step that stores their final answers: no worker starts
        them after this, and their tickets (if any) are gone."""
        ids = list(call_ids)
        for call_id in ids:
            batch.set(self._keys.closed(session, call_id), 1, ex=CLOSED_TTL_S)
        self.stage_drop(batch, *ids)

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
