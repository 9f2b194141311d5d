"""Continue sessions that owe the model a turn: after a completion is applied, and
when the replica that ran them died (their lease expired with the session owed); close
the open turn of an agent tool's child whose worker died (loop/closing.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from toolfleet.orchestrator.loop.closing import WORKER_LOST, close_open_turn
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.shared.errors import SessionBusyError
from toolfleet.shared.keys import SessionKey

log = logging.getLogger(__name__)

Notify = Callable[[SessionKey, Update], Awaitable[None] | None]


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # tasks holding or waiting for the lock


class BackgroundTasks:
    """Coroutines run as tasks of their own (entries applied, sessions continued), kept
    until they end so that their owner can stop them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[None]]:
        """The tasks running now (a snapshot: they leave the set as they end)."""
        return iter(list(self._tasks))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task, tracked until it ends."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class SessionLocks:
    """One asyncio lock per session, kept only while a task holds or waits for it: a
    replica serving millions of sessions over its life keeps none of the finished ones."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's lock for the block (waiting for it if another task has it)."""
        held = self._held.setdefault(session_id, _Held())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            # Counted, not weakly referenced: the entry goes the moment the last user does,
            # cancelled waiters included, whatever else still refers to the lock.
            held.users -= 1
            if held.users == 0:
                del self._held[session_id]


class SessionResumer:
    """Runs the model on sessions as they stand, one task per session at a time."""

    def __init__(
        self,
        runners: Mapping[str, Runner],
        tasks: BackgroundTasks,
        *,
        on_update: Notify | None = None,
        lease_wait_s: float = 600.0,
    ) -> None:
        self._runners = runners  # by app name
        self._tasks = tasks  # the listener's: its stop ends them
        self._on_update = on_update
        self.lease_wait_s = lease_wait_s
        self._resuming: set[SessionKey] = set()  # sessions a task of this replica is continuing
        self.locks = SessionLocks()

    def lock(self, session: str) -> AbstractAsyncContextManager[None]:
        """Serializes this replica's work on one session (completions, resumes)."""
        return self.locks.hold(session)

    async def notify(self, session: SessionKey, update: Update) -> None:
        """Hand an update to the replica's `on_update` (SSE streams, the CLI)."""
        if self._on_update is not None:
            result = self._on_update(session, update)
            if result is not None:
                await result

    async def continue_session(
        self, runner: Runner, session: SessionKey, hold: LeaseHold, *, release: bool = True
    ) -> None:
        """Run the model on the session as it stands, under the caller's lease `hold`
        (released with the answer unless `release` is False: the caller writes on)."""
        stored = await runner.store.get(session)
        async for update in runner.invoke(stored, None, lease=hold, release=release):
            await self.notify(session, update)

    async def resume_owed(self) -> None:
        """Start continuing every owed session of this replica's apps that no replica is
        running: its invocation died with its replica, or a result was applied and
        never answered."""
        any_runner = next(iter(self._runners.values()))  # all share one Redis and prefix
        store, leases = any_runner.store, any_runner.leases
        owed = await store.sessions_to_resume()
        for session in await leases.unleased(owed):
            if session in self._resuming:
                continue
            app, owner = await store.app_and_owner(session)
            if app is None:  # the session expired (or was deleted): nothing to continue
                await store.resumed(session)
                continue
            runner = self._runners.get(app or "")
            if runner is None:
                continue  # another app's session: its own orchestrator finishes it
            self._resuming.add(session)
            if owner not in (None, runner.agent.name):
                # An agent tool's child, owed and unleased: its worker was lost while it
                # ran. Only a worker runs a child; the sweep answers what it left open.
                self._tasks.spawn(self._close_child(runner, session, owner or ""))
            else:
                self._tasks.spawn(self._resume_one(runner, session))

    async def _close_child(self, runner: Runner, session: SessionKey, owner: str) -> None:
        why = (
            f"the worker running agent tool {owner!r} was lost before this call was "
            "answered; its result is not used"
        )
        try:
            async with self.lock(session), runner.leases.hold(session) as hold:
                if session in await runner.store.sessions_to_resume():
                    stored = await runner.store.get(session)
                    closed = await close_open_turn(
                        runner.store, stored, error_type=WORKER_LOST, why=why, fence=hold.fence
                    )
                    await runner.tool_runner.stop(session, closed)  # any still running
                    if closed:
                        log.info("closed %s of session %s: its worker was lost", closed, session)
                    else:  # nothing open: its worker died before its first call or after
                        await runner.store.resumed(session, fence=hold.fence)
        except SessionBusyError:
            pass  # its worker (a redelivery) or another replica took it first
        except Exception:
            log.exception("closing session %s failed; it stays owed", session)
        finally:
            self._resuming.discard(session)

    async def _resume_one(self, runner: Runner, session: SessionKey) -> None:
        try:
            async with self.lock(session), runner.leases.hold(session) as hold:
                if session in await runner.store.sessions_to_resume():
                    log.info("continuing session %s (its invocation did not finish)", session)
                    await self.continue_session(runner, session, hold)
        except SessionBusyError:
            pass  # another replica took it first
        except Exception:
            # One broken session must not stop the listener; it stays owed.
            log.exception("continuing session %s failed; it stays owed", session)
        finally:
            self._resuming.discard(session)
