"""Session writes fenced by a lease: applied only while the writer holds the session's
lease, checked by Redis in the same step, and applied once however often they are sent.

A replica that lost its lease - it paused past the TTL, Redis was away, another
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

import math
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.keys import SessionKey, applied_record
from toolfleet.shared.outages import APPLIED_TTL_S
from toolfleet.shared.replication import replicated, run_replicated
from toolfleet.shared.scripts import LuaScript

# Lua unpacks at most about 8,000 values into one call: a command longer than this many
# words (a turn's thousands of call ids in one SADD, say) runs in parts of its words after
# the head, inside the same script. Even, so that HSET's field/value pairs (and ZADD's
# score/member pairs) stay whole.
PART_WORDS = 1000
# The commands a batch may send longer than PART_WORDS: their head's length, and whether
# the parts' replies add up (counts) or the last one stands (a list's new length).
SPLITTABLE = {
    "RPUSH": (2, "last"), "LPUSH": (2, "last"), "SADD": (2, "sum"), "SREM": (2, "sum"),
    "HSET": (2, "sum"), "HDEL": (2, "sum"), "DEL": (1, "sum"), "ZADD": (2, "sum"),
    "ZREM": (2, "sum"),
}  # fmt: skip
_SPLIT_RULES = ", ".join(
    f"{name} = {{{head}, '{how}'}}" for name, (head, how) in SPLITTABLE.items()
)

# What a fenced write applies, from ARGV[base] on (WriteBatch.flat): the number m of TTL
# refreshes, m key/seconds pairs, then each command as its length and its words; the
# TTLs are given after the commands. The commands' replies in `out`. A long command that
# cannot run in parts is refused before anything is written.
_APPLY_LUA = f"""
local part, split = {PART_WORDS}, {{{_SPLIT_RULES}}}
local out = {{}}
local ttls = base + 1 + 2 * tonumber(ARGV[base])
local i = ttls
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  if n > part and not split[string.upper(ARGV[i + 1])] then
    return redis.error_reply('ERR a ' .. ARGV[i + 1] .. ' of ' .. n .. ' words cannot run in parts')
  end
  i = i + n + 1
end
local function run(at, n)
  if n <= part then return redis.call(unpack(ARGV, at, at + n - 1)) end
  local head, how = unpack(split[string.upper(ARGV[at])])
  local last, total, reply = at + n - 1, 0, nil
  for from = at + head, last, part do
    local words = {{unpack(ARGV, at, at + head - 1)}}
    for k = from, math.min(from + part - 1, last) do words[#words + 1] = ARGV[k] end
    reply = redis.call(unpack(words))
    total = total + reply
  end
  if how == 'sum' then return total end
  return reply
end
i = ttls
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  out[#out + 1] = run(i + 1, n)
  i = i + n + 1
end
for j = base + 1, ttls - 1, 2 do redis.call('expire', ARGV[j], ARGV[j + 1]) end
"""


def record_ttl_s(lease_ttl_s: float) -> int:
    """How long the replies of a write fenced by a lease of `lease_ttl_s` are kept: at
    least APPLIED_TTL_S, and twice the lease's life if that is longer - a copy arriving
    after that finds the lease lapsed."""
    return max(APPLIED_TTL_S, math.ceil(2 * lease_ttl_s))


def _replayed(key: str) -> str:
    """Lua: a write sent before, whose reply was lost, answers its recorded replies and
    applies nothing. `key`: the write's own record (`applied_record`)."""
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
_FENCED, _GUARDED, _ONCE = (LuaScript(s) for s in (_FENCED_LUA, _GUARDED_LUA, _ONCE_LUA))


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
    its guard says, sent as one command of a pipeline (after `LeaseClaim.commands`)."""

    keys: tuple[str, str, str, str]
    args: tuple[Any, ...]

    @classmethod
    def of(cls, fence: Fence, guard: Guard, batch: WriteBatch) -> GuardedWrite:
        """The write of `batch` under `fence` and `guard`: send its `command`, then pass
        the command's reply to `replies`."""
        keys = (
            fence.key,
            applied_record(fence.applied_prefix),
            guard.events_key,
            guard.session_key,
        )
        args = (fence.token, guard.length, guard.trimmed, fence.record_ttl_s, *batch.flat())
        return cls(keys, args)

    def command(self) -> tuple[Any, ...]:
        """The write as one command of a pipeline: a plain EVALSHA, as LuaScript.run sends
        it (redis-py's evalsha wraps it twice)."""
        return ("EVALSHA", _GUARDED.sha, len(self.keys), *self.keys, *self.args)

    async def replies(self, client: aioredis.Redis, reply: Any) -> list[Any] | None:
        """The batch's replies, or None if nothing was written. A server that did not
        know the script (a restart) ran nothing: it runs now, guarded alike."""
        if isinstance(reply, NoScriptError):
            reply = await _GUARDED.run(client, len(self.keys), *self.keys, *self.args)
        if isinstance(reply, Exception):
            raise reply
        if not isinstance(reply, list):
            return None
        await replicated(client)
        return list(reply)


@dataclass(frozen=True)
class Fence:
    """A held lease as a condition on writes: `run` applies a batch only while the
    lease key holds `token`."""

    session: SessionKey
    key: str
    token: str
    applied_prefix: str  # Keys.applied_writes(session)
    record_ttl_s: int  # how long its writes' replies are kept (`record_ttl_s`)

    async def run(
        self, client: aioredis.Redis, batch: WriteBatch, *, release: bool = False
    ) -> list[Any]:
        """Apply `batch` atomically if we hold the lease (and release it with `release`);
        raise LeaseLostError otherwise. The replies of the batch's commands, in order.
        Applied once, however often the client sends it (a retry after a lost reply)."""
        keys = (self.key, applied_record(self.applied_prefix))
        try:
            release_flag = "1" if release else "0"
            reply = await run_replicated(
                client,
                _FENCED, len(keys), *keys, self.token, release_flag, self.record_ttl_s,
                *batch.flat(),
            )  # fmt: skip
        except aioredis.ResponseError as exc:
            if "LEASELOST" not in str(exc):
                raise
            raise LeaseLostError(
                f"session {self.session!r}: this invocation lost the session's lease "
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
    replies = await batch.run(client)
    await replicated(client)
    return replies


async def apply_once(client: aioredis.Redis, batch: WriteBatch, applied_prefix: str) -> list[Any]:
    """Apply `batch` atomically, once however often the client sends it (a retry after a
    lost reply): its replies are recorded under `<applied_prefix>:<write id>`."""
    key = applied_record(applied_prefix)
    return list(await run_replicated(client, _ONCE, 1, key, APPLIED_TTL_S, *batch.flat()))
