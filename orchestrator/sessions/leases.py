"""Session leases: one invocation runs a session at a time, across every replica.

A lease is a Redis key holding its holder's token, with a time to live. It is taken
with SET NX (alone, or inside the pipeline that reads the session), renewed on a timer
while held (only while the token still matches), and released by compare-and-delete.

Every session write of an invocation is fenced by its lease (`Fence.run`): Redis
applies the write only while the key still holds the writer's token, in the same
step. A replica that lost its lease - it paused past the TTL, Redis was away, another
replica took over - is refused (LeaseLostError) and cannot write over the new holder.

Every such write is applied once, even when it is sent twice: the client retries a
command whose connection broke (toolfleet.shared.outages), and Redis may have run it
before its reply was lost. Each write has its own id; the script that applies it also
records its replies under that id (for a minute, or twice the lease's life if longer:
`record_ttl_s`), and a second arrival gets the recorded replies instead of applying it
again - before the lease is checked, since the write may have released the lease
itself. A copy arriving after its record is gone finds the lease lapsed: it is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from toolfleet.orchestrator.connections import decoded, stop_task
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import LeaseLostError, SessionBusyError
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

_RELEASE_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
# Extend only a lease we still hold: an expired one may have been taken and released.
_RENEW_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)
# What a fenced write applies, from ARGV[base] on (WriteBatch.flat): the number m of TTL
# refreshes, m key/seconds pairs, then each command as its length and its words; the
# TTLs are given after the commands. The commands' replies in `out`.
_APPLY_LUA = """
local out = {}
local ttls = base + 1 + 2 * tonumber(ARGV[base])
local i = ttls
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  out[#out + 1] = redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
for j = base + 1, ttls - 1, 2 do redis.call('expire', ARGV[j], ARGV[j + 1]) end
"""
# How long a write's replies are kept against its second arrival, at least: longer than
# a client goes on retrying one (toolfleet.shared.outages.RIDE_OUT_S, about 15 s, and its
# connection attempts). A fenced write's are kept for twice its lease's life if that is
# longer (`record_ttl_s`): a copy arriving after that finds the lease lapsed.
APPLIED_TTL_S = 60


def record_ttl_s(lease_ttl_s: float) -> int:
    """How long the replies of a write fenced by a lease of `lease_ttl_s` are kept."""
    return max(APPLIED_TTL_S, math.ceil(2 * lease_ttl_s))


def _replayed(key: str) -> str:
    """Lua: a write sent before, whose reply was lost, answers its recorded replies and
    applies nothing. `key`: the write's own record (`Fence.applied_key`)."""
    return f"""
local recorded = redis.call('get', {key})
if recorded then return cjson.decode(recorded) end
"""


def _recorded(key: str, ttl: str) -> str:
    """Lua: record the replies `out` of the write just applied, for `ttl` seconds. JSON
    keeps what a batch's writes reply: counts, OK, nil."""
    return f"""
redis.call('set', {key}, cjson.encode(out), 'EX', {ttl})
"""


# KEYS[1]: the lease, 2: the write's record. ARGV: token, release (1/0), the record's
# TTL, then the batch. The writes happen only while the token holds the lease.
_FENCED_LUA = (
    _replayed("KEYS[2]")
    + """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('LEASELOST the session lease is not held by this writer')
end
local base = 4
"""
    + _APPLY_LUA
    + _recorded("KEYS[2]", "ARGV[3]")
    + """
if ARGV[2] == '1' then redis.call('del', KEYS[1]) end
return out
"""
)
# A fenced write that also waits for nothing else to have changed a session: KEYS[1] the
# lease, 2 the write's record, 3 its events list, 4 its hash. ARGV: token, the events'
# length and the count compaction dropped (as the writer read them), the record's TTL,
# then the batch. 0 (nothing written) unless the token holds the lease and the session
# is still as read.
_GUARDED_LUA = (
    _replayed("KEYS[2]")
    + """
if redis.call('get', KEYS[1]) ~= ARGV[1] or redis.call('exists', KEYS[4]) == 0 then
  return 0
end
if redis.call('llen', KEYS[3]) ~= tonumber(ARGV[2]) then return 0 end
if tonumber(redis.call('hget', KEYS[4], 'trimmed') or '0') ~= tonumber(ARGV[3]) then
  return 0
end
local base = 5
"""
    + _APPLY_LUA
    + _recorded("KEYS[2]", "ARGV[4]")
    + """
return out
"""
)
# A write outside any lease (calls sent by CeleryFleet.run alone, or the MCP server),
# applied once all the same: KEYS[1] the write's record. ARGV: the record's TTL, then the
# batch.
_ONCE_LUA = (
    _replayed("KEYS[1]")
    + "local base = 2\n"
    + _APPLY_LUA
    + _recorded("KEYS[1]", "ARGV[1]")
    + "return out\n"
)
_FENCED, _GUARDED, _ONCE, _RENEW, _RELEASE = (
    LuaScript(s) for s in (_FENCED_LUA, _GUARDED_LUA, _ONCE_LUA, _RENEW_LUA, _RELEASE_LUA)
)
# How long a failed renewal waits before it tries again (doubling, within the TTL).
RENEW_RETRY_S = 0.2


@dataclass(frozen=True)
class LeaseClaim:
    """Take a session's lease in the same round trip as reading the session."""

    session_id: str
    key: str
    owner: str
    ttl_s: float
    applied_prefix: str  # Keys.applied_writes: where its writes record their replies

    def stage(self, pipe: Pipeline) -> None:
        """Two commands of a read pipeline: take the lease if free, then read its holder."""
        pipe.set(self.key, self.owner, nx=True, px=int(self.ttl_s * 1000))
        pipe.get(self.key)

    def check(self, replies: Sequence[Any]) -> None:
        """Raise SessionBusyError unless the two replies of `stage` say we hold it."""
        acquired, holder = replies
        if not acquired and (holder is None or decoded(holder) != self.owner):
            raise _busy(self.session_id, holder)

    @property
    def fence(self) -> Fence:
        """The fence of the lease this claim takes."""
        return Fence(
            self.session_id, self.key, self.owner, self.applied_prefix, record_ttl_s(self.ttl_s)
        )


@dataclass(frozen=True)
class Guard:
    """A session as its writer read it: its events' length and how many compaction
    dropped before them. A guarded write applies only if both are still so."""

    events_key: str
    session_key: str
    length: int
    trimmed: int


@dataclass(frozen=True)
class GuardedWrite:
    """A batch applied atomically if a fence's lease is held and the session is still as
    its guard says, staged as one command of a pipeline (after `LeaseClaim.stage`)."""

    keys: tuple[str, str, str, str]
    args: tuple[Any, ...]

    @classmethod
    def stage(cls, pipe: Pipeline, fence: Fence, guard: Guard, batch: WriteBatch) -> GuardedWrite:
        """Add the write to `pipe`; pass its reply to `replies`."""
        keys = (fence.key, fence.applied_key(), guard.events_key, guard.session_key)
        args = (fence.token, guard.length, guard.trimmed, fence.record_ttl_s, *batch.flat())
        write = cls(keys, args)
        pipe.evalsha(_GUARDED.sha, len(keys), *keys, *write.args)
        return write

    async def replies(self, client: aioredis.Redis, reply: Any) -> list[Any] | None:
        """The batch's replies, or None if nothing was written. A server that did not
        know the script (a restart) ran nothing: it runs now, guarded alike."""
        if isinstance(reply, NoScriptError):
            reply = await _GUARDED.run(client, len(self.keys), *self.keys, *self.args)
        if isinstance(reply, Exception):
            raise reply
        return list(reply) if isinstance(reply, list) else None


@dataclass(frozen=True)
class Fence:
    """A held lease as a condition on writes: `run` applies a batch only while the
    lease key holds `token`."""

    session_id: str
    key: str
    token: str
    applied_prefix: str  # Keys.applied_writes(session_id)
    record_ttl_s: int  # how long its writes' replies are kept (`record_ttl_s`)

    def applied_key(self) -> str:
        """The key of a new write's record: its id, the same on each of its retries."""
        return f"{self.applied_prefix}:{unique_hex(16)}"

    async def run(
        self, client: aioredis.Redis, batch: WriteBatch, *, release: bool = False
    ) -> list[Any]:
        """Apply `batch` atomically if we hold the lease (and release it with `release`);
        raise LeaseLostError otherwise. The replies of the batch's commands, in order.
        Applied once, however often the client sends it (a retry after a lost reply)."""
        keys = (self.key, self.applied_key())
        try:
            release_flag = "1" if release else "0"
            reply = await _FENCED.run(
                client, len(keys), *keys, self.token, release_flag, self.record_ttl_s,
                *batch.flat(),
            )  # fmt: skip
        except aioredis.ResponseError as exc:
            if "LEASELOST" not in str(exc):
                raise
            raise LeaseLostError(
                f"session {self.session_id!r}: this invocation lost the session's lease "
                "(it expired or another orchestrator took it over); its write was refused"
            ) from exc
        return list(reply)


async def write(
    client: aioredis.Redis,
    batch: WriteBatch,
    fence: Fence | None,
    *,
    release: bool = False,
    unfenced_once: str | None = None,
) -> list[Any]:
    """Apply a batch of session writes: fenced by the writer's lease when given (always,
    inside an invocation), else as a plain transaction (tests, tools run in-process).
    `unfenced_once`: without a fence, apply it once all the same (`apply_once`), with its
    record under this prefix."""
    if fence is not None:
        return await fence.run(client, batch, release=release)
    if unfenced_once is not None:
        return await apply_once(client, batch, unfenced_once)
    return await batch.run(client)


async def apply_once(client: aioredis.Redis, batch: WriteBatch, applied_prefix: str) -> list[Any]:
    """Apply `batch` atomically, once however often the client sends it (a retry after a
    lost reply): its replies are recorded under `<applied_prefix>:<write id>`."""
    key = f"{applied_prefix}:{unique_hex(16)}"
    return list(await _ONCE.run(client, 1, key, APPLIED_TTL_S, *batch.flat()))


class Leases:
    """Take, renew and release session leases for one replica."""

    def __init__(self, client: aioredis.Redis, keys: Keys, replica_id: str, ttl_s: float) -> None:
        self._redis = client
        self._keys = keys
        self.replica_id = replica_id
        self.ttl_s = ttl_s
        self._record_ttl_s = record_ttl_s(ttl_s)

    def token(self) -> str:
        """A new holder token: each hold has its own, so that two tasks of one replica
        exclude each other too."""
        return f"{self.replica_id}/{unique_hex(8)}"

    def claim(self, session_id: str) -> LeaseClaim:
        """A claim with a new token, for `SessionStore.get(..., lease=)`."""
        return LeaseClaim(
            session_id,
            self._keys.lease(session_id),
            self.token(),
            self.ttl_s,
            self._keys.applied_writes(session_id),
        )

    def fence(self, session_id: str, token: str) -> Fence:
        """The fence of the lease `token` holds on the session."""
        applied = self._keys.applied_writes(session_id)
        return Fence(session_id, self._keys.lease(session_id), token, applied, self._record_ttl_s)

    async def acquire(self, session_id: str, owner: str) -> None:
        """Take the lease; raise SessionBusyError if another holds it."""
        key = self._keys.lease(session_id)
        if await self._redis.set(key, owner, nx=True, px=int(self.ttl_s * 1000)):
            return
        holder = await self._redis.get(key)
        if holder is not None and decoded(holder) == owner:
            await self.renew(session_id, owner)
            return
        raise _busy(session_id, holder)

    async def renew(self, session_id: str, owner: str) -> bool:
        """Extend the lease to a full TTL if `owner` still holds it (False if not)."""
        ttl_ms = int(self.ttl_s * 1000)
        renewed = await _RENEW.run(self._redis, 1, self._keys.lease(session_id), owner, ttl_ms)
        return bool(renewed)

    async def wait_for(
        self, session_id: str, owner: str, wait_s: float, poll_s: float = 0.05
    ) -> None:
        """Acquire the lease, waiting up to `wait_s` while another invocation runs."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return await self.acquire(session_id, owner)
            except SessionBusyError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(poll_s)  # the holder's invocation is still running

    async def release(self, session_id: str, owner: str) -> None:
        """Release the lease if `owner` still holds it."""
        await _RELEASE.run(self._redis, 1, self._keys.lease(session_id), owner)

    async def unleased(self, session_ids: Sequence[str]) -> list[str]:
        """Those of the sessions no replica holds the lease of."""
        if not session_ids:
            return []
        holders = await self._redis.mget([self._keys.lease(s) for s in session_ids])
        return [s for s, holder in zip(session_ids, holders, strict=True) if holder is None]

    @contextlib.asynccontextmanager
    async def hold(
        self, session_id: str, wait_s: float = 0.0, *, held_as: str | None = None
    ) -> AsyncIterator[LeaseHold]:
        """Hold the session's lease (renewed while held); wait up to `wait_s` for it.
        `held_as`: the token it was already taken with (a `claim` of the session read)."""
        token = held_as or self.token()
        if held_as is None:
            await self.wait_for(session_id, token, wait_s)
        hold = LeaseHold(self.fence(session_id, token), LeaseRenewal(self, session_id, token))
        try:
            yield hold
        finally:
            await hold.renewal.stop()
            if not hold.released:
                with contextlib.suppress(aioredis.RedisError):  # it expires by itself
                    await self.release(session_id, token)


class LeaseRenewal:
    """Renews a held lease every third of its lifetime. A timer, not a task, until a
    renewal is due: most invocations end before that and cost nothing here.

    A renewal that fails (Redis away) is retried until the lease would have expired;
    then, or when another holder has it, the lease is `lost` - and the fenced writes of
    the invocation are refused by Redis from then on."""

    def __init__(self, leases: Leases, session_id: str, token: str) -> None:
        self._leases = leases
        self._session_id = session_id
        self._token = token
        self._period_s = leases.ttl_s / 3
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._held_until = time.monotonic() + leases.ttl_s
        self.lost_event = asyncio.Event()  # set once the lease is lost for good
        self._timer = self._loop.call_later(self._period_s, self._due)

    def _due(self) -> None:
        self._task = asyncio.create_task(self._renew(), name=f"lease {self._session_id}")

    async def _renew(self) -> None:
        delay = RENEW_RETRY_S
        while not self._stopped:
            started = time.monotonic()
            try:
                held = await self._leases.renew(self._session_id, self._token)
            except aioredis.RedisError as exc:
                if time.monotonic() + delay >= self._held_until:
                    break
                log.warning("renewing the lease of %s failed (%s); retrying", self._session_id, exc)
                await asyncio.sleep(delay)
                delay *= 2
                continue
            if not held:
                break
            self._held_until = started + self._leases.ttl_s
            self._timer = self._loop.call_later(self._period_s, self._due)
            return
        if not self._stopped:
            self.lost_event.set()
            log.error("lost the lease of session %s: its invocation stops", self._session_id)

    @property
    def lost(self) -> bool:
        """Whether the lease was lost (expired while Redis was away, or taken over)."""
        return self.lost_event.is_set()

    async def stop(self) -> None:
        """Stop renewing (the lease itself stays until released or expired)."""
        self._stopped = True
        self._timer.cancel()
        # Never wait on a renewal unbounded: redis-py can swallow a cancellation that
        # lands inside a command (the renewal also checks `_stopped`).
        await stop_task(self._task, timeout_s=1.0)


@dataclass
class LeaseHold:
    """A lease this replica holds: its fence for the invocation's writes, and its
    renewal. The invocation may release it in its last write (`released`)."""

    fence: Fence
    renewal: LeaseRenewal
    released: bool = False


def _busy(session_id: str, holder: bytes | str | None) -> SessionBusyError:
    return SessionBusyError(
        f"session {session_id!r} is being run by another orchestrator "
        f"({decoded(holder or b'?')}); wait for its invocation to end"
    )
