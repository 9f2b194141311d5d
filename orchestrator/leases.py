"""A session's lease while this replica holds it: renewed on a timer, released once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio.client import Pipeline

from orchestrator.connections import stop_task
from orchestrator.sessions import SessionStore


class LeaseRenewal:
    """Renews a held lease every third of its lifetime. A timer, not a task, until a
    renewal is due: most invocations end before that and cost nothing here."""

    def __init__(self, store: SessionStore, session_id: str, token: str, ttl_s: float) -> None:
        self._store = store
        self._session_id = session_id
        self._token = token
        self._ttl_s = ttl_s
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(ttl_s / 3, self._due)

    def _due(self) -> None:
        self._task = asyncio.create_task(self._renew(), name=f"lease {self._session_id}")

    async def _renew(self) -> None:
        await self._store.acquire_lease(self._session_id, self._token, self._ttl_s)
        if not self._stopped:
            self._timer = self._loop.call_later(self._ttl_s / 3, self._due)

    async def stop(self) -> None:
        self._stopped = True
        self._timer.cancel()
        # Never wait on a renewal unbounded: redis-py can swallow a cancellation that
        # lands inside a command (the renewal also checks `_stopped`).
        await stop_task(self._task, timeout_s=1.0)


@dataclass
class LeaseHold:
    """A lease this replica holds; the invocation may release it in its last write."""

    store: SessionStore
    session_id: str
    token: str
    renewal: LeaseRenewal
    released: bool = False

    async def release_in(self) -> Callable[[Pipeline], None]:
        """Stop renewing, and return the commands that release the lease inside the
        caller's transaction (mark `released` once that transaction ran)."""
        await self.renewal.stop()

        def stage(pipe: Pipeline) -> None:
            self.store.stage_release_lease(pipe, self.session_id, self.token)

        return stage
