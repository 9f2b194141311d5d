"""Session leases: one invocation runs a session at a time, across every replica.

A lease is a Redis key holding its holder's token, with a time to live. It is taken
with SET NX (alone, or inside the pipeline that reads the session), renewed on a timer
while held (only while the token still matches), and released by compare-and-delete.

Every session write of an invocation is fenced by its lease
(toolfleet.orchestrator.sessions.fencing): Redis applies it only while the key still
holds the writer's token, in the same step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from toolfleet.orchestrator.connections import decoded, stop_task
from toolfleet.orchestrator.sessions.fencing import Fence, record_ttl_s
from toolfleet.shared.errors import SessionBusyError
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.replication import replicated, run_replicated
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
_RENEW, _RELEASE = (LuaScript(s) for s in (_RENEW_LUA, _RELEASE_LUA))
# How long a failed renewal waits before it tries again (doubling, within the TTL).
RENEW_RETRY_S = 0.2


@dataclass(frozen=True)
class LeaseClaim:
    """Take a session's lease in the same round trip as reading the session."""

    session: SessionKey
    key: str
    owner: str
    ttl_s: float
    applied_prefix: str  # Keys.applied_writes: where its writes record their replies
    # Monotonic time of the claim, before the read that takes the lease is first sent: the
    # lease lives from then at the latest (the read may be retried for seconds).
    claimed_at: float = field(default_factory=time.monotonic)

    def commands(self) -> list[tuple[str | int, ...]]:
        """Two commands for a session read to send: take the lease if free, then read
        its holder (replies for `check`)."""
        return [
            ("SET", self.key, self.owner, "NX", "PX", int(self.ttl_s * 1000)),
            ("GET", self.key),
        ]

    def check(self, replies: Sequence[Any]) -> None:
        """Raise SessionBusyError unless the two replies of `commands` say we hold it."""
        acquired, holder = replies
        if not acquired and (holder is None or decoded(holder) != self.owner):
            raise _busy(self.session, holder)

    @property
    def fence(self) -> Fence:
        """The fence of the lease this claim takes."""
        return Fence(
            self.session, self.key, self.owner, self.applied_prefix, record_ttl_s(self.ttl_s)
        )


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

    def claim(self, session: SessionKey) -> LeaseClaim:
        """A claim with a new token, for `SessionStore.get(..., lease=)`."""
        return LeaseClaim(
            session,
            self._keys.lease(session),
            self.token(),
            self.ttl_s,
            self._keys.applied_writes(session),
        )

    def fence(self, session: SessionKey, token: str) -> Fence:
        """The fence of the lease `token` holds on the session."""
        applied = self._keys.applied_writes(session)
        return Fence(session, self._keys.lease(session), token, applied, self._record_ttl_s)

    async def acquire(self, session: SessionKey, owner: str) -> None:
        """Take the lease; raise SessionBusyError if another holds it."""
        key = self._keys.lease(session)
        if await self._redis.set(key, owner, nx=True, px=int(self.ttl_s * 1000)):
            await replicated(self._redis)  # held once the replicas have it: a failover keeps it
            return
        holder = await self._redis.get(key)
        if holder is not None and decoded(holder) == owner:
            await self.renew(session, owner)
            return
        raise _busy(session, holder)

    async def renew(self, session: SessionKey, owner: str) -> bool:
        """Extend the lease to a full TTL if `owner` still holds it (False if not)."""
        ttl_ms = int(self.ttl_s * 1000)
        key = self._keys.lease(session)
        renewed = await run_replicated(self._redis, _RENEW, 1, key, owner, ttl_ms)
        return bool(renewed)

    async def wait_for(
        self, session: SessionKey, owner: str, wait_s: float, poll_s: float = 0.05
    ) -> float:
        """Acquire the lease, waiting up to `wait_s` while another invocation runs; the
        monotonic time the successful attempt began (the lease lives from then at most)."""
        deadline = time.monotonic() + wait_s
        while True:
            started = time.monotonic()
            try:
                await self.acquire(session, owner)
                return started
            except SessionBusyError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(poll_s)  # the holder's invocation is still running

    async def release(self, session: SessionKey, owner: str) -> None:
        """Release the lease if `owner` still holds it."""
        await _RELEASE.run(self._redis, 1, self._keys.lease(session), owner)

    async def unleased(self, sessions: Sequence[SessionKey]) -> list[SessionKey]:
        """Those of the sessions no replica holds the lease of."""
        if not sessions:
            return []
        holders = await self._redis.mget([self._keys.lease(s) for s in sessions])
        return [s for s, holder in zip(sessions, holders, strict=True) if holder is None]

    @contextlib.asynccontextmanager
    async def hold(
        self, session: SessionKey, wait_s: float = 0.0, *, claimed: LeaseClaim | None = None
    ) -> AsyncIterator[LeaseHold]:
        """Hold the session's lease (renewed while held); wait up to `wait_s` for it.
        `claimed`: the claim it was taken with already (by the session read)."""
        if claimed is None:
            token = self.token()
            since = await self.wait_for(session, token, wait_s)
        else:
            token, since = claimed.owner, claimed.claimed_at
        renewal = LeaseRenewal(self, session, token, since)
        hold = LeaseHold(self.fence(session, token), renewal)
        try:
            yield hold
        finally:
            await hold.renewal.stop()
            if not hold.released:
                with contextlib.suppress(aioredis.RedisError):  # it expires by itself
                    await self.release(session, token)


class LeaseRenewal:
    """Renews a held lease every third of its lifetime, counted from `since` (monotonic:
    when the command that took it was first sent; a retried one may land much later,
    and the lease's own clock runs from its first arrival). A timer, not a task, until a
    renewal is due: most invocations end before that and cost nothing here.

    A renewal that fails (Redis away) is retried until the lease would have expired;
    then, or when another holder has it, the lease is `lost` - and the fenced writes of
    the invocation are refused by Redis from then on."""

    def __init__(self, leases: Leases, session: SessionKey, token: str, since: float) -> None:
        self._leases = leases
        self._session = session
        self._token = token
        self._period_s = leases.ttl_s / 3
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._held_until = since + leases.ttl_s
        self.lost_event = asyncio.Event()  # set once the lease is lost for good
        first_s = max(0.0, since + self._period_s - time.monotonic())
        self._timer = self._loop.call_later(first_s, self._due)

    def _due(self) -> None:
        self._task = asyncio.create_task(self._renew(), name=f"lease {self._session}")

    async def _renew(self) -> None:
        delay = RENEW_RETRY_S
        while not self._stopped:
            started = time.monotonic()
            try:
                held = await self._leases.renew(self._session, self._token)
            except aioredis.RedisError as exc:
                if time.monotonic() + delay >= self._held_until:
                    break
                log.warning("renewing the lease of %s failed (%s); retrying", self._session, exc)
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
            log.error("lost the lease of session %s: its invocation stops", self._session)

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


def _busy(session: SessionKey, holder: bytes | str | None) -> SessionBusyError:
    return SessionBusyError(
        f"session {session!r} is being run by another orchestrator "
        f"({decoded(holder or b'?')}); wait for its invocation to end"
    )
