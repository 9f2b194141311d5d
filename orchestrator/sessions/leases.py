"""Session leases: one invocation runs a session at a time, across every replica.

A lease is a Redis key holding its holder's token, with a time to live. It is taken
with SET NX (alone, or inside the pipeline that reads the session), renewed on a timer
while held, and released by compare-and-delete - alone, or inside the transaction
that stores the invocation's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from toolfleet.orchestrator.connections import decoded, stop_task
from toolfleet.shared.errors import SessionBusyError
from toolfleet.shared.keys import Keys

_RELEASE_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)


@dataclass(frozen=True)
class LeaseClaim:
    """Take a session's lease in the same round trip as reading the session."""

    session_id: str
    key: str
    owner: str
    ttl_s: float

    def stage(self, pipe: Pipeline) -> None:
        """Two commands of a read pipeline: take the lease if free, then read its holder."""
        pipe.set(self.key, self.owner, nx=True, px=int(self.ttl_s * 1000))
        pipe.get(self.key)

    def check(self, replies: Sequence[Any]) -> None:
        """Raise SessionBusyError unless the two replies of `stage` say we hold it."""
        acquired, holder = replies
        if not acquired and (holder is None or decoded(holder) != self.owner):
            raise _busy(self.session_id, holder)


class Leases:
    """Take, renew and release session leases for one replica."""

    def __init__(self, client: aioredis.Redis, keys: Keys, replica_id: str, ttl_s: float) -> None:
        self._redis = client
        self._keys = keys
        self.replica_id = replica_id
        self.ttl_s = ttl_s

    def token(self) -> str:
        """A new holder token: each hold has its own, so that two tasks of one replica
        exclude each other too."""
        return f"{self.replica_id}/{uuid.uuid4().hex[:8]}"

    def claim(self, session_id: str) -> LeaseClaim:
        """A claim with a new token, for `SessionStore.get(..., lease=)`."""
        return LeaseClaim(session_id, self._keys.lease(session_id), self.token(), self.ttl_s)

    async def acquire(self, session_id: str, owner: str) -> None:
        """Take (or renew) the lease; raise SessionBusyError if another holds it."""
        key = self._keys.lease(session_id)
        ttl_ms = int(self.ttl_s * 1000)
        if await self._redis.set(key, owner, nx=True, px=ttl_ms):
            return
        holder = await self._redis.get(key)
        if holder is not None and decoded(holder) == owner:
            await self._redis.pexpire(key, ttl_ms)
            return
        raise _busy(session_id, holder)

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
        pipe = self._redis.pipeline(transaction=False)
        self.stage_release(pipe, session_id, owner)
        await pipe.execute()

    def stage_release(self, pipe: Pipeline, session_id: str, owner: str) -> None:
        """`release` as a command of the caller's transaction."""
        # Delete only our own lease: compare-and-delete in one step.
        pipe.eval(_RELEASE_LUA, 1, self._keys.lease(session_id), owner)

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
        hold = LeaseHold(self, session_id, token, LeaseRenewal(self, session_id, token))
        try:
            yield hold
        finally:
            await hold.renewal.stop()
            if not hold.released:
                await self.release(session_id, token)


class LeaseRenewal:
    """Renews a held lease every third of its lifetime. A timer, not a task, until a
    renewal is due: most invocations end before that and cost nothing here."""

    def __init__(self, leases: Leases, session_id: str, token: str) -> None:
        self._leases = leases
        self._session_id = session_id
        self._token = token
        self._period_s = leases.ttl_s / 3
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(self._period_s, self._due)

    def _due(self) -> None:
        self._task = asyncio.create_task(self._renew(), name=f"lease {self._session_id}")

    async def _renew(self) -> None:
        await self._leases.acquire(self._session_id, self._token)
        if not self._stopped:
            self._timer = self._loop.call_later(self._period_s, self._due)

    async def stop(self) -> None:
        """Stop renewing (the lease itself stays until released or expired)."""
        self._stopped = True
        self._timer.cancel()
        # Never wait on a renewal unbounded: redis-py can swallow a cancellation that
        # lands inside a command (the renewal also checks `_stopped`).
        await stop_task(self._task, timeout_s=1.0)


@dataclass
class LeaseHold:
    """A lease this replica holds; the invocation may release it in its last write."""

    leases: Leases
    session_id: str
    token: str
    renewal: LeaseRenewal
    released: bool = False

    async def release_in(self) -> Callable[[Pipeline], None]:
        """Stop renewing, and return the commands that release the lease inside the
        caller's transaction (mark `released` once that transaction ran)."""
        await self.renewal.stop()

        def stage(pipe: Pipeline) -> None:
            self.leases.stage_release(pipe, self.session_id, self.token)

        return stage


def _busy(session_id: str, holder: bytes | str | None) -> SessionBusyError:
    return SessionBusyError(
        f"session {session_id!r} is being run by another orchestrator "
        f"({decoded(holder or b'?')}); wait for its invocation to end"
    )
