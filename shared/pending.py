"""The pending-call records: one Redis hash, call id -> PendingCall JSON, per session
the set of its calls' ids in that hash (`Keys.session_pending`), and every id scored by
its record's creation time (`Keys.pending_by_age`).

Every read and write of those records goes through `PendingCalls`. Writes are staged
on the caller's WriteBatch, so a record appears or goes in the same step as what makes
it true (the session event that answers the call). A worker opens a ticket only for a
call that is not closed, checked in the same step (`open`).

A record, its id in its session's set and its id in the age index are written and
removed in the same step (here, and in the scripts that post results and apply or claim
completions), so one session's calls are read without the whole hash (`asession`), and
the tickets are counted by age without it (`acount_created`). The set lives as long as
the session's other keys: a session that expires takes it along, and the records it
leaves are refused and removed when a completion for them comes, or by the orchestrators'
sweep (`asweep_orphans`) once older than the sessions' time to live. Records written before
the sets or the index existed are added to them once, by the first read that finds
`Keys.pending_indexed` not at INDEX_VERSION.

Records are stored with secret-named values masked at any depth; sealed arguments are
kept (a credential request's call is sent again from its record).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Mapping
from typing import Any, cast

import redis
import redis.asyncio as aioredis

from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, redact_deep, secret_name_set
from toolfleet.shared.scripts import LuaScript

# A closed call's marker outlives any redelivery or late post of it, then goes.
CLOSED_TTL_S = 7 * 24 * 3600

# The latest progress reports a pending record keeps (its session keeps the first hundred
# as events): the record is read by every post and listing, and progress may come without
# end.
PROGRESS_KEPT = 20

# Beside a call's closed marker: the call's ticket holds the tool's initial response (an
# earlier delivery ran the tool and posted it): a redelivery must not run it again.
TICKETED_SUFFIX = ":ticketed"

# KEYS: closed marker, pending hash, the session's pending set, the session hash, the age
# index. ARGV: call id, record, its creation time. 1 if recorded; 0 if closed, or if an
# earlier delivery of the call posted its initial response (its marker, TICKETED_SUFFIX).
# The set takes the session's time to live (the session's writes restart both together).
_OPEN_LUA = f"""
if redis.call('exists', KEYS[1], KEYS[1] .. '{TICKETED_SUFFIX}') > 0 then return 0 end
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('sadd', KEYS[3], ARGV[1])
redis.call('zadd', KEYS[5], ARGV[3], ARGV[1])
local ttl = redis.call('pttl', KEYS[4])
if ttl > 0 then redis.call('pexpire', KEYS[3], ttl) end
return 1
"""
_OPEN = LuaScript(_OPEN_LUA)

# KEYS: the session's pending set, pending hash, the indexed marker. ARGV: INDEX_VERSION.
# The records of the set's ids (one snapshot); nil while the marker is not at the version
# (records may be missing from the sets). HMGET in parts: Lua unpacks at most about 8,000
# values into one call.
_SESSION_LUA = """
if redis.call('get', KEYS[3]) ~= ARGV[1] then return false end
local ids = redis.call('smembers', KEYS[1])
local out = {}
for i = 1, #ids, 1000 do
  local part = {unpack(ids, i, math.min(i + 999, #ids))}
  local values = redis.call('hmget', KEYS[2], unpack(part))
  for j = 1, #part do
    if values[j] then out[#out + 1] = values[j] end
  end
end
return out
"""
_SESSION = LuaScript(_SESSION_LUA)

# KEYS: pending hash, the age index, then per session its pending set and its session
# hash. ARGV: triples of call id, the number of its session (1, 2, ...) and its creation
# time. Adds each call still recorded to the age index and to its session's set, which
# takes the session's time to live; a session gone (expired) gets no set: its records are
# refused and removed when a completion for them comes.
_INDEX_LUA = """
for i = 1, #ARGV, 3 do
  local n = tonumber(ARGV[i + 1])
  local set, session = KEYS[2 * n + 1], KEYS[2 * n + 2]
  if redis.call('hexists', KEYS[1], ARGV[i]) == 1 then
    redis.call('zadd', KEYS[2], ARGV[i + 2], ARGV[i])
    local ttl = redis.call('pttl', session)
    if ttl ~= -2 then
      redis.call('sadd', set, ARGV[i])
      if ttl > 0 then redis.call('pexpire', set, ttl) end
    end
  end
end
return 1
"""
_INDEX = LuaScript(_INDEX_LUA)
# Records read (HSCAN) and indexed per step.
INDEX_CHUNK = 1000
# What `Keys.pending_indexed` holds once the records are in their sessions' sets and in
# the age index ("1": in the sets only, before the index existed).
INDEX_VERSION = "2"

# KEYS: the session's pending set, pending hash, the age index, the set of its open turn's
# dispatched calls, then the session's keys to delete. ARGV: the prefix of its calls'
# closed markers, closed TTL. Every call of the session still pending is closed (a late
# result for it is refused) and its record removed; so is every call its open turn sent,
# which a worker may not have started yet: started after this, it finds itself closed and
# opens no ticket (a long-running call's would answer a new session of the same id).
_DROP_SESSION_LUA = """
local ids = redis.call('smembers', KEYS[1])
for _, id in ipairs(ids) do
  redis.call('hdel', KEYS[2], id)
  redis.call('zrem', KEYS[3], id)
  redis.call('set', ARGV[1] .. id, 1, 'EX', ARGV[2])
end
for _, id in ipairs(redis.call('smembers', KEYS[4])) do
  redis.call('set', ARGV[1] .. id, 1, 'EX', ARGV[2])
end
redis.call('del', KEYS[1], unpack(KEYS, 4))
return #ids
"""
_DROP_SESSION = LuaScript(_DROP_SESSION_LUA)

# KEYS: the session hash, pending hash, the age index, the session's pending set, the
# call's closed marker, its app's completions stream, the session's completion order.
# ARGV: call id, closed TTL, the record as read, "served" or "". Removes a record whose
# session is gone, unless the session or the record changed since it was read; 1 if it
# went. A served call (`toolfleet mcp serve`'s, read by no orchestrator) takes along what
# was posted for it and never fetched: nothing else removes it from the stream.
_DROP_ORPHAN_LUA = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
if redis.call('hget', KEYS[2], ARGV[1]) ~= ARGV[3] then return 0 end
redis.call('hdel', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('srem', KEYS[4], ARGV[1])
redis.call('set', KEYS[5], 1, 'EX', ARGV[2])
if ARGV[4] ~= 'served' then return 1 end
for _, id in ipairs(redis.call('lrange', KEYS[7], 0, -1)) do
  local entry = redis.call('xrange', KEYS[6], id, id)[1]
  local fields = entry and entry[2] or {}
  for i = 1, #fields, 2 do
    if fields[i] == 'completion' then
      local ok, posted = pcall(cjson.decode, fields[i + 1])
      if ok and type(posted) == 'table' and posted['call_id'] == ARGV[1] then
        redis.call('xdel', KEYS[6], id)
        redis.call('lrem', KEYS[7], 0, id)
      end
    end
  end
end
return 1
"""
_DROP_ORPHAN = LuaScript(_DROP_ORPHAN_LUA)
# Records looked at per sweep step (`asweep_orphans`).
SWEEP_CHUNK = 100


class PendingCalls:
    """Where long-running calls wait for their final result (or a credential)."""

    def __init__(self, keys: Keys, secret_names: Iterable[str] = DEFAULT_SECRET_NAMES) -> None:
        self.key = keys.pending()
        self._keys = keys
        self._secrets = secret_name_set(secret_names)
        self._indexing = asyncio.Lock()  # one indexing at a time, not one per reader

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
        """Record (or update) `calls` in the caller's atomic step, each in its session's
        set."""
        by_session: dict[SessionKey, list[str]] = {}
        created: dict[str, float] = {}
        for call in calls:
            batch.hset(self.key, call.call_id, self.record(call))
            by_session.setdefault(call.session_key, []).append(call.call_id)
            created[call.call_id] = call.created_at
        for session, ids in by_session.items():
            batch.sadd(self._keys.session_pending(session), *ids)
        if created:
            batch.zadd(self._keys.pending_by_age(), created)

    def stage_drop(self, batch: WriteBatch, session: SessionKey, *call_ids: str) -> None:
        """Remove the records of `session`'s calls `call_ids` in the caller's atomic step."""
        if call_ids:
            batch.hdel(self.key, *call_ids)
            batch.srem(self._keys.session_pending(session), *call_ids)
            batch.zrem(self._keys.pending_by_age(), *call_ids)

    def open(self, client: redis.Redis, call: PendingCall) -> bool:
        """Record a ticket for `call` unless the orchestrator closed the call already
        (it timed out, say), or an earlier delivery of it ran the tool and posted its
        initial response (its process died before the broker's ack): then False, and the
        call must not run."""
        session = call.session_key
        opened = _OPEN.run_sync(
            client,
            5,
            self._keys.closed(session, call.call_id),
            self.key,
            self._keys.session_pending(session),
            self._keys.session(session),
            self._keys.pending_by_age(),
            call.call_id,
            self.record(call),
            call.created_at,
        )
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
        self.stage_drop(batch, session, *ids)

    def get(self, client: redis.Redis, call_id: str) -> PendingCall | None:
        """The record of `call_id`, or None when it is not pending."""
        return _parsed(client.hget(self.key, call_id))

    def all(self, client: redis.Redis) -> list[PendingCall]:
        """Every pending call, oldest first."""
        return _sorted(client.hgetall(self.key))

    def stage_aget(self, pipe: aioredis.client.Pipeline, call_id: str) -> None:
        """Queue the read of `call_id`'s record on the caller's pipeline (one round trip
        with its other reads); `parsed` reads the record from the reply."""
        pipe.hget(self.key, call_id)

    @staticmethod
    def parsed(reply: Any) -> PendingCall | None:
        """The record in the reply to `stage_aget`, or None when it is not pending."""
        return _parsed(reply)

    async def aall(self, client: aioredis.Redis) -> list[PendingCall]:
        """`all` on an asyncio client."""
        return _sorted(await client.hgetall(self.key))

    async def asession(self, client: aioredis.Redis, session: SessionKey) -> list[PendingCall]:
        """The pending calls of `session`, oldest first: only its records are read."""
        keys = (self._keys.session_pending(session), self.key, self._keys.pending_indexed())
        raw = await _SESSION.run(client, 3, *keys, INDEX_VERSION)
        if raw is None:  # records from before the sets: index them once
            await self._indexed(client)
            raw = await _SESSION.run(client, 3, *keys, INDEX_VERSION)
        return _of_session(raw or (), session)

    def session(self, client: redis.Redis, session: SessionKey) -> list[PendingCall]:
        """`asession` on a synchronous client; until the records are indexed (an
        orchestrator's first read does it) the whole hash is read instead."""
        keys = (self._keys.session_pending(session), self.key, self._keys.pending_indexed())
        raw = _SESSION.run_sync(client, 3, *keys, INDEX_VERSION)
        if raw is None:
            return [call for call in self.all(client) if call.session_key == session]
        return _of_session(raw, session)

    async def acount_created(
        self, client: aioredis.Redis, spans: Iterable[tuple[float, float]]
    ) -> list[int]:
        """How many pending calls were created in each of `spans`, `(after, until)` in
        epoch seconds (`after` excluded, `until` included; infinities allowed): counted in
        the age index, no record read."""
        await self._indexed(client)
        pipe = client.pipeline(transaction=False)
        for after, until in spans:
            pipe.zcount(self._keys.pending_by_age(), f"({_bound(after)}", _bound(until))
        return [int(count) for count in await pipe.execute()]

    async def acounts(self, client: aioredis.Redis, sessions: Iterable[SessionKey]) -> list[int]:
        """How many calls each of `sessions` has pending, in their order (their sets'
        sizes: no record is read)."""
        await self._indexed(client)
        pipe = client.pipeline(transaction=False)
        for session in sessions:
            pipe.scard(self._keys.session_pending(session))
        return [int(count) for count in await pipe.execute()]

    async def aoldest(self, client: aioredis.Redis, count: int) -> list[PendingCall]:
        """The `count` oldest pending calls, oldest first (their ids from the age index,
        then only their records)."""
        await self._indexed(client)
        if count <= 0:
            return []
        ids = cast(list[bytes], await client.zrange(self._keys.pending_by_age(), 0, count - 1))
        if not ids:
            return []
        raw = await client.hmget(self.key, ids)
        return [PendingCall.model_validate_json(value) for value in raw if value is not None]

    async def _indexed(self, client: aioredis.Redis) -> None:
        """Index the records (`aindex_all`) unless that was done: once per process at a
        time, not once per reader."""
        if await self._index_current(client):
            return
        async with self._indexing:
            if not await self._index_current(client):
                await self.aindex_all(client)

    async def _index_current(self, client: aioredis.Redis) -> bool:
        marker = await client.get(self._keys.pending_indexed())
        return marker is not None and _text(marker) == INDEX_VERSION

    async def aindex_all(self, client: aioredis.Redis) -> None:
        """Add every record to its session's set and to the age index, a part of the hash
        per step (a record
        written or removed meanwhile is kept in step by its own write), then mark the
        hash as indexed. Safe to run again, and from several processes at once."""
        cursor = 0
        while True:
            cursor, found = await client.hscan(self.key, cursor, count=INDEX_CHUNK)
            # A dict, or a flat list of fields and values from a client that parses less.
            values = found.values() if isinstance(found, dict) else found[1::2]
            calls = [PendingCall.model_validate_json(value) for value in values]
            if calls:
                await self._index(client, calls)
            if cursor == 0:
                break
        await client.set(self._keys.pending_indexed(), INDEX_VERSION)

    async def _index(self, client: aioredis.Redis, calls: list[PendingCall]) -> None:
        numbers: dict[SessionKey, int] = {}
        keys: list[str] = [self.key, self._keys.pending_by_age()]
        args: list[str | int | float] = []
        for call in calls:
            session = call.session_key
            if session not in numbers:
                numbers[session] = len(numbers) + 1
                keys += [self._keys.session_pending(session), self._keys.session(session)]
            args += [call.call_id, numbers[session], call.created_at]
        await _INDEX.run(client, len(keys), *keys, *args)

    async def adrop_session(self, client: aioredis.Redis, session: SessionKey, *also: str) -> int:
        """Close and remove every pending call of `session`, close the calls its open turn
        sent, and delete its sets and the keys `also` (the session's own), in one step;
        how many calls were pending."""
        closed_prefix = self._keys.closed(session, "")
        index = self._keys.session_pending(session)
        dropped = await _DROP_SESSION.run(
            client,
            4 + len(also),
            index,
            self.key,
            self._keys.pending_by_age(),
            self._keys.dispatched(session),
            *also,
            closed_prefix,
            CLOSED_TTL_S,
        )
        return int(dropped)

    async def asweep_orphans(
        self, client: aioredis.Redis, created_before: float, after: float = -math.inf
    ) -> tuple[int, float | None]:
        """Remove up to SWEEP_CHUNK records created before `created_before` (and after
        `after`) whose session is gone, closing their calls: a session that expired
        while its call waited leaves a record no completion may ever come for. Return
        how many went and where the next step goes on (None: every record was looked
        at). A call of `toolfleet mcp serve` has no session: it goes once as old, with
        what was posted for it (its MCP client never asked for it)."""
        await self._indexed(client)
        found: Any = await client.zrangebyscore(
            self._keys.pending_by_age(),
            f"({_bound(after)}",
            f"({_bound(created_before)}",
            start=0,
            num=SWEEP_CHUNK,
            withscores=True,
        )
        if not found:
            return 0, None
        ids = [_text(member) for member, _ in found]
        records: Any = await client.hmget(self.key, ids)
        dropped = 0
        for call_id, raw in zip(ids, records, strict=True):
            try:
                call = _parsed(raw)
            except ValueError:  # not a record this version reads: not its to remove
                continue
            if call is None:
                continue
            session = call.session_key
            dropped += await _DROP_ORPHAN.run(
                client,
                7,
                self._keys.session(session),
                self.key,
                self._keys.pending_by_age(),
                self._keys.session_pending(session),
                self._keys.closed(session, call_id),
                self._keys.completions(call.app_name),
                self._keys.completion_order(session),
                call_id,
                CLOSED_TTL_S,
                raw,
                "served" if call.agent == SERVED_AGENT else "",
            )
        last = float(found[-1][1])
        return dropped, last if len(found) == SWEEP_CHUNK else None


def _parsed(raw: Any) -> PendingCall | None:
    return None if raw is None else PendingCall.model_validate_json(raw)


def _of_session(raw: Iterable[Any], session: SessionKey) -> list[PendingCall]:
    calls = [PendingCall.model_validate_json(value) for value in raw]
    mine = [call for call in calls if call.session_key == session]
    return sorted(mine, key=lambda call: call.created_at)


def _bound(seconds: float) -> str:
    """A score bound as ZCOUNT reads it (`inf`, `-inf` or a number)."""
    if math.isinf(seconds):
        return "+inf" if seconds > 0 else "-inf"
    return repr(seconds)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _sorted(raw: Mapping[Any, Any]) -> list[PendingCall]:
    calls = [PendingCall.model_validate_json(value) for value in raw.values()]
    return sorted(calls, key=lambda call: call.created_at)
