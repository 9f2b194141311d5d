"""A session's cancellation on the replica running it: the replica learns of it (the
cancels stream) and sets the invocation's Cancellation; the loop stops at the next await
it races against it (the model call) and the fleet answers the calls it awaits."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolfleet.shared.cancellation import CancelRequest
from toolfleet.shared.keys import SessionKey

_T = TypeVar("_T")

CANCELLED_MESSAGE = "cancelled by the user or an operator"


@dataclass
class Cancellation:
    """One running invocation's: set once its session is cancelled."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    keep_tickets: bool = False  # leave the session's pending tickets open
    # The work racing it now (`unless_cancelled`), cancelled when it is set.
    racing: set[_Race] = field(default_factory=set)

    @property
    def requested(self) -> bool:
        """Whether the session was cancelled."""
        return self.event.is_set()

    def set(self, keep_tickets: bool) -> None:
        """Cancel the invocation."""
        self.keep_tickets = keep_tickets
        self.event.set()
        for work in list(self.racing):
            work.cancel()

    def withdraw(self) -> None:
        """Take the cancellation back: what it stopped is done, what follows runs."""
        self.event.clear()
        self.keep_tickets = False


class CancelBoard:
    """The sessions this replica runs an invocation of, and their cancellations."""

    def __init__(self) -> None:
        self._running: dict[SessionKey, list[Cancellation]] = {}

    @contextmanager
    def watch(self, session: SessionKey) -> Iterator[Cancellation]:
        """A Cancellation for an invocation of `session`, while it runs."""
        cancellation = Cancellation()
        self._running.setdefault(session, []).append(cancellation)
        try:
            yield cancellation
        finally:
            watching = self._running.get(session, [])
            watching.remove(cancellation)
            if not watching:
                self._running.pop(session, None)

    def requested(self, session: SessionKey) -> bool:
        """Whether an invocation of the session running here was cancelled."""
        return any(c.requested for c in self._running.get(session, []))

    def cancel(self, request: CancelRequest) -> bool:
        """Set the cancellations of the session's invocations here; whether there was one."""
        watching = self._running.get(request.session_key, [])
        for cancellation in watching:
            cancellation.set(request.keep_tickets)
        return bool(watching)


async def unless_cancelled(work: Awaitable[_T], cancellation: Cancellation | None) -> _T | None:
    """`work`'s value, or None if the cancellation comes first (`work` is then cancelled:
    use this only where stopping half-way leaves nothing behind, such as a model call).

    `work` runs in the caller's own task, which the cancellation cancels while it runs:
    a task per model call was 1.6% of a one-call turn's CPU."""
    if cancellation is None:
        return await work
    if cancellation.requested:
        _discard(work)
        return None
    task = asyncio.current_task()
    if task is None:  # awaited outside any task: there is nothing to cancel
        return await work
    race = _Race(task)
    cancellation.racing.add(race)
    try:
        value = await work
    except asyncio.CancelledError:
        # Ours alone (nobody else is cancelling the task too): the session's cancellation.
        if race.fired and task.uncancel() == 0:
            return None
        raise
    finally:
        cancellation.racing.discard(race)
    if race.fired:
        task.uncancel()  # `work` swallowed the cancellation and answered: that stands
    return value


class _Race:
    """A task running work that a cancellation stops (`Cancellation.racing`)."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.fired = False

    def cancel(self) -> None:
        """Stop the work: cancel the task at its current await."""
        if not self.fired:
            self.fired = True
            self.task.cancel()


def _discard(work: Awaitable[Any]) -> None:
    """Never start `work`: a coroutine is closed, a future cancelled."""
    if inspect.iscoroutine(work):
        work.close()
    elif isinstance(work, asyncio.Future):
        work.cancel()
