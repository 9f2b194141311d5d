"""A call's turn under its tool's fleet-wide limits: a slot (max_concurrency), then a start
(rate_limit), waited for - never failed - and given back on every way out.

A thread's call (prefork, threads, solo) waits on its thread: on prefork the waiting call
holds its pool process. A coroutine's call (io worker) waits on the call loop with
asyncio sleeps between tries, holding no thread: other calls run meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis

from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import RunningCall, ToolCall
from toolfleet.shared.metrics import guarded, metrics
from toolfleet.shared.tool_limits import (
    ACQUIRE,
    CLOSED,
    START,
    Leases,
    new_holder,
    parse_rate,
)
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.call_loop import CallStopped, CallTimeLimit

log = logging.getLogger(__name__)

# Between tries for a slot: from the first, doubling up to the last.
FIRST_TRY_S = 0.02
LAST_TRY_S = 0.5


# The io calls' Redis round trips while they wait: off the call loop's thread.
_TRIES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="toolfleet-limits")

# Runs a call's coroutine (the tool's) once its limits let it.
Wrapper = Callable[[Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class Turn:
    """A call's slot (None: its tool has no max_concurrency); give it back with `end`."""

    key: str
    holder: str | None


class Gate:
    """Admits calls of limited tools when the fleet-wide limits allow (see the module)."""

    def __init__(self, client: redis.Redis, keys: Keys, lease_s: float) -> None:
        self._client = client
        self._keys = keys
        self._leases = Leases(client, lease_s)

    def turn_for(self, tool: FunctionTool, call: ToolCall) -> Turn:
        """The Turn `call` will hold, before it is taken: a caller that may be interrupted
        anywhere (Celery's soft time limit, raised between any two bytecodes) makes it
        first and ends it however its wait ends - ending one never taken changes nothing."""
        holder = new_holder(call.call_id) if tool.options.max_concurrency is not None else None
        return Turn(self._keys.tool_slots(tool.name), holder)

    def wait(
        self,
        tool: FunctionTool,
        call: ToolCall,
        worker: str,
        limit_s: float = 0.0,
        turn: Turn | None = None,
    ) -> Turn | None:
        """Block this thread until the call may start: its Turn (`turn`, made by
        `turn_for`, if given), or None if the call was closed meanwhile (answered: it must
        not run). Past `limit_s` (0: none), the call's time limit, CallTimeLimit is raised,
        no slot kept: on a pool thread no signal stops the wait, and an orchestrator that
        is down closes no call."""
        tries = self._tries(tool, call, worker, turn)
        ends_at = time.monotonic() + limit_s
        try:
            step = next(tries)
            while isinstance(step, float):
                left_s = ends_at - time.monotonic() if limit_s else step
                if left_s <= 0:
                    raise CallTimeLimit(limit_s)
                # The limit's turn is polled: a slot may free on any host.
                time.sleep(min(step, left_s))
                step = tries.send(None)
        except BaseException:  # interrupted (Celery's soft time limit): no slot kept
            tries.close()
            raise
        result: Turn | None = step
        return result

    async def wait_async(self, tool: FunctionTool, call: ToolCall, worker: str) -> Turn | None:
        """`wait` on the call loop: Redis round trips on a helper thread, sleeps between
        them on the loop, so the loop's other calls run."""
        tries = self._tries(tool, call, worker)
        trying: Future[Any] | None = None
        try:
            trying = _TRIES.submit(next, tries)
            step = await asyncio.wrap_future(trying)
            while isinstance(step, float):
                await asyncio.sleep(step)
                trying = _TRIES.submit(tries.send, None)
                step = await asyncio.wrap_future(trying)
        except BaseException:  # stopped while waiting (its time limit): no slot kept
            if trying is None or trying.done():
                self._abandon(tries, trying)
            else:  # a try is still running: give back what it takes once it ends
                trying.add_done_callback(lambda ended: self._abandon(tries, ended))
            raise
        result: Turn | None = step
        return result

    def _abandon(self, tries: Any, last: Future[Any] | None) -> None:
        """Give back the slot of a wait that was stopped, whatever its last try took."""
        took = None if last is None or last.cancelled() or last.exception() else last.result()
        if isinstance(took, Turn):
            self.end(took)
        tries.close()  # a slot held while waiting for a start is dropped by the generator

    def wrap(self, tool: FunctionTool, call: ToolCall, worker: str) -> Wrapper:
        """What runs a coroutine call of `tool`: it starts once the call has its turn, which
        it gives back however it ends; a call closed while waiting stops (CallStopped:
        answered already, nothing is posted)."""

        async def limited(coro: Coroutine[Any, Any, Any]) -> Any:
            try:
                turn = await self.wait_async(tool, call, worker)
            except BaseException:
                coro.close()
                raise
            if turn is None:
                coro.close()
                raise CallStopped()
            try:
                return await coro
            finally:
                self.end(turn)

        return limited

    def end(self, turn: Turn) -> None:
        """Give the call's slot back (the call ended, whichever way)."""
        if turn.holder is not None:
            self._leases.drop(turn.key, turn.holder)

    def _acquire(self, tool: FunctionTool, call: ToolCall, holder: str) -> int:
        slots = self._keys.tool_slots(tool.name)
        closed = self._keys.closed(call.session_key, call.call_id)
        limit = tool.options.max_concurrency
        reply = int(ACQUIRE.run_sync(self._client, 2, slots, closed, holder, limit, self._lease()))
        if reply == 1:
            self._leases.hold(slots, holder)
        return reply

    def _start(self, tool: FunctionTool, call: ToolCall) -> int:
        rate = parse_rate(str(tool.options.rate_limit))
        starts = self._keys.tool_starts(tool.name)
        closed = self._keys.closed(call.session_key, call.call_id)
        period_ms = max(int(rate.period_s * 1000), 1)
        member = f"{call.call_id}:{unique_hex(8)}"
        return int(START.run_sync(self._client, 2, starts, closed, rate.count, period_ms, member))

    def _lease(self) -> int:
        return self._leases.lease_ms

    def _note(self, call: ToolCall, worker: str, waiting_for: str | None) -> None:
        """What `toolfleet run` shows of the call: waiting for a limit, or running since now."""
        record = RunningCall(
            worker=worker, pid=os.getpid(), started_at=time.time(), waiting_for=waiting_for
        )
        running = self._keys.running(call.session_key)
        self._client.hset(running, call.call_id, record.model_dump_json())

    def _tries(
        self, tool: FunctionTool, call: ToolCall, worker: str, turn: Turn | None = None
    ) -> Any:
        """A generator of the call's tries: yields the seconds to wait before the next, then
        returns (StopIteration's value) nothing; its last yield is the Turn or None."""
        options = tool.options
        turn = turn or self.turn_for(tool, call)
        slots, holder = turn.key, turn.holder
        began = time.monotonic()
        waited = False
        pause = FIRST_TRY_S
        try:
            if holder is not None:
                while (reply := self._acquire(tool, call, holder)) != 1:
                    if reply == CLOSED:
                        _closed_while_waiting(call)
                        yield None
                        return
                    if not waited:
                        self._note(call, worker, "a slot")
                        waited = True
                    yield pause
                    pause = min(pause * 2, LAST_TRY_S)
            if options.rate_limit is not None:
                while (wait_ms := self._start(tool, call)) != 0:
                    if wait_ms == CLOSED:
                        if holder is not None:
                            self._leases.drop(slots, holder)
                        _closed_while_waiting(call)
                        yield None
                        return
                    if not waited:
                        self._note(call, worker, "its rate limit")
                        waited = True
                    yield min(wait_ms / 1000, LAST_TRY_S)
            if waited:
                self._note(call, worker, None)
        except BaseException:
            # An interruption, or a Redis error, while holding it: give it back (held, it
            # would be renewed for as long as this process lives).
            if holder is not None:
                self._leases.drop(slots, holder)
            raise
        if waited:
            with guarded():
                recorded = metrics()
                recorded.labelled(recorded.limit_wait_seconds, tool.name).observe(
                    time.monotonic() - began
                )
        yield Turn(slots, holder)


def _closed_while_waiting(call: ToolCall) -> None:
    log.warning(
        "call %s (%s) was answered before its limit let it start: not run",
        call.call_id,
        call.tool,
    )
