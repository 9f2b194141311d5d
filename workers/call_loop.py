"""One event loop per worker process, on a daemon thread, shared by every coroutine call.

An io worker runs many calls at once: each Celery thread hands its coroutine to this loop
and waits for it, so a thousand calls awaiting the network cost one thread each and share
one loop. Nothing of one call may disturb another on the shared loop: every task a call
starts is tagged with the call (a context variable read by the loop's task factory), so a
call that ends - returns, raises, runs out of time or is interrupted - cancels its own
tasks and no one else's.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any

from toolfleet.shared.event_loop import LoopFactory

log = logging.getLogger(__name__)

# How long the tasks a call leaves behind get to finish cancelling before the call is
# answered anyway. Under the prefork pool it runs after the soft time limit and before the
# hard one (the soft one + 1 s, see toolfleet.workers.tasks).
DRAIN_TIMEOUT_S = 0.5

# The call a task belongs to; tasks inherit their creator's context, hence its tag.
_current_call: contextvars.ContextVar[CallRun | None] = contextvars.ContextVar(
    "toolfleet_call", default=None
)


class CallTimeLimit(Exception):
    """A coroutine call ran past its time limit and was cancelled."""


class CallStopped(Exception):
    """A coroutine call was stopped by the orchestrator (its session was cancelled): it
    has been answered already, so nothing is to be reported."""


class CallRun:
    """One call's coroutine on the shared loop: its time limit and the tasks it started.
    `ended`, when given, is set once its tasks are cancelled and drained (for a thread
    that waits on the call: a call started without one needs none)."""

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        time_limit_s: float,
        ended: threading.Event | None = None,
    ) -> None:
        self._coro = coro
        self._time_limit_s = time_limit_s
        self.tasks: set[asyncio.Task[Any]] = set()  # touched on the loop thread only
        self.ended = ended

    def discard(self) -> None:
        """Close the coroutine unrun (its call was stopped before it began)."""
        self._coro.close()

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Count `task` as this call's until it is done."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> Any:
        """Run the coroutine as this call, within its time limit; then cancel what it left."""
        _current_call.set(self)  # this task's own context: only its children inherit it
        task = asyncio.current_task()
        assert task is not None
        self.adopt(task)
        try:
            if self._time_limit_s <= 0:
                return await self._coro
            limit = asyncio.timeout(self._time_limit_s)
            try:
                async with limit:  # cancels the coroutine at the limit, as TimeoutError
                    return await self._coro
            except TimeoutError:
                if limit.expired():
                    raise CallTimeLimit(self._time_limit_s) from None
                raise  # the tool's own TimeoutError
        finally:
            self.tasks.discard(task)
            try:
                await self._cancel_leftovers()
            finally:
                if self.ended is not None:
                    self.ended.set()

    async def _cancel_leftovers(self) -> None:
        """Cancel the tasks this call started and did not await, and wait for them to finish
        (bounded). A task that ignores its cancellation is left on the loop, logged: it
        cannot be removed without stopping every other call's loop."""
        deadline = asyncio.get_running_loop().time() + DRAIN_TIMEOUT_S
        # Again until none is left: a cancelled task may start another (a cleanup task).
        while pending := set(self.tasks):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                log.error(
                    "%d task(s) of a coroutine tool ignored cancellation for %g s; they stay "
                    "on this worker process's event loop: %s",
                    len(pending),
                    DRAIN_TIMEOUT_S,
                    ", ".join(sorted(repr(t.get_coro()) for t in pending)),
                )
                return
            for leftover in pending:
                leftover.cancel()
            await asyncio.wait(pending, timeout=remaining)


def _task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    # Runs in the creator's context: a task created by a call's code belongs to that call.
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
    owner = _current_call.get()
    if owner is not None:
        owner.adopt(task)
    return task


# Called on the loop's thread when a started call ends: (its value, None) or (None, error).
CallEnded = Callable[[Any, BaseException | None], None]


@dataclass(eq=False)
class _Started:
    """A call begun with `CallLoop.start`: what ends it, and its task once it has one."""

    call: CallRun
    call_id: str
    on_end: CallEnded
    context: contextvars.Context
    task: asyncio.Task[Any] | None = None
    stop_requested: bool = False


# What makes a call loop's event loop (None: asyncio's), as the worker's settings choose.
_new_loop: LoopFactory | None = None


def use_loop_factory(new_loop: LoopFactory | None) -> None:
    """Make this process's call loops (and those of the children it forks) with
    `new_loop`; None: asyncio's own."""
    global _new_loop
    _new_loop = new_loop


class CallLoop:
    """The process's event loop, running on its own daemon thread: made by `new_loop`
    (None: asyncio's own)."""

    def __init__(self, new_loop: LoopFactory | None = None) -> None:
        self.pid = os.getpid()
        self.loop = (new_loop or asyncio.new_event_loop)()
        self.loop.set_task_factory(_task_factory)
        self._thread = threading.Thread(target=self._serve, name="toolfleet-call-loop", daemon=True)
        self._thread.start()
        # Coroutine calls running now, by call id: the orchestrator may stop one.
        self._running: dict[str, tuple[CallRun, Future[Any]]] = {}
        self._stopped: set[str] = set()
        # Calls started without a waiting thread (`start`), by call id, and those not begun.
        self._started: dict[str, _Started] = {}
        self._incoming: list[_Started] = []
        self._incoming_lock = threading.Lock()
        self._wake_scheduled = False

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def close(self) -> None:
        """Stop the loop and close it (calls still running on it are dropped)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, Any], time_limit_s: float, call_id: str = "") -> Any:
        """Run `coro` on the loop as one call and wait for its value (from any thread).

        Past `time_limit_s` (0: none) it is cancelled and CallTimeLimit is raised. If the
        waiting thread is interrupted instead (Celery's soft time limit, a signal to the
        main thread of a prefork child), the call is cancelled, its tasks get
        DRAIN_TIMEOUT_S to finish, and the interruption goes on. Stopped by `stop`, the
        call is cancelled alike and CallStopped is raised."""
        ended = threading.Event()
        call = CallRun(coro, time_limit_s, ended)
        future = asyncio.run_coroutine_threadsafe(call.run(), self.loop)
        if call_id:
            self._running[call_id] = (call, future)
        try:
            return future.result()
        except CancelledError:
            if call_id in self._stopped:
                ended.wait(DRAIN_TIMEOUT_S * 2)
                raise CallStopped(call_id) from None
            raise
        except BaseException:
            if not future.done():
                future.cancel()
                ended.wait(DRAIN_TIMEOUT_S * 2)
            raise
        finally:
            if call_id:
                self._running.pop(call_id, None)
                self._stopped.discard(call_id)

    def start(
        self,
        coro: Coroutine[Any, Any, Any],
        time_limit_s: float,
        call_id: str,
        on_end: CallEnded,
    ) -> None:
        """Start `coro` on the loop as one call and return at once (from any thread); no
        thread waits for it. When it ends, `on_end(value, error)` is called on the loop's
        thread: error is None, CallTimeLimit past `time_limit_s`, CallStopped if `stop`
        cancelled it, or the coroutine's own exception.

        Calls started together wake the loop once: a wide turn's thousand starts cost a
        few wake-ups, not a thousand."""
        started = _Started(CallRun(coro, time_limit_s), call_id, on_end, contextvars.copy_context())
        self._started[call_id] = started
        with self._incoming_lock:
            self._incoming.append(started)
            wake, self._wake_scheduled = not self._wake_scheduled, True
        if wake:
            self.loop.call_soon_threadsafe(self._start_incoming)

    def _start_incoming(self) -> None:
        with self._incoming_lock:
            incoming, self._incoming = self._incoming, []
            self._wake_scheduled = False
        for started in incoming:
            if started.stop_requested:  # stopped before it began: it never runs
                started.call.discard()
                self._end(started, None, CallStopped(started.call_id))
                continue
            # In the starter's context, as run_coroutine_threadsafe would (trace context).
            task = self.loop.create_task(started.call.run(), context=started.context)
            started.task = task
            task.add_done_callback(lambda done, s=started: self._task_done(s, done))  # type: ignore[misc]

    def _task_done(self, started: _Started, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            stopped = started.stop_requested
            self._end(started, None, CallStopped(started.call_id) if stopped else CancelledError())
        elif (error := task.exception()) is not None:
            self._end(started, None, error)
        else:
            self._end(started, task.result(), None)

    def _end(self, started: _Started, value: Any, error: BaseException | None) -> None:
        self._started.pop(started.call_id, None)
        started.on_end(value, error)

    def _cancel_started(self, started: _Started) -> None:
        if started.task is not None:
            started.task.cancel()  # not begun yet: _start_incoming sees stop_requested

    def running_ids(self) -> set[str]:
        """The ids of the calls running here now (from any thread: copies of the keys)."""
        return set(list(self._started)) | set(list(self._running))

    def stop(self, call_id: str) -> bool:
        """Cancel the coroutine call `call_id` if it runs here (from any thread)."""
        started = self._started.get(call_id)
        if started is not None:
            started.stop_requested = True
            self.loop.call_soon_threadsafe(self._cancel_started, started)
            return True
        running = self._running.get(call_id)
        if running is None:
            return False
        self._stopped.add(call_id)
        running[1].cancel()
        return True


_call_loop: CallLoop | None = None
_lock = threading.Lock()


def running_call_loop() -> CallLoop | None:
    """This process's call loop if it has one (a process that ran no coroutine has none)."""
    loop = _call_loop
    return loop if loop is not None and loop.pid == os.getpid() else None


def call_loop() -> CallLoop:
    """This process's call loop, started on first use (again in a forked child)."""
    global _call_loop
    with _lock:
        if _call_loop is None or _call_loop.pid != os.getpid():
            _call_loop = CallLoop(_new_loop)
        return _call_loop
