"""Run one tool for one call envelope and turn the outcome into a ToolResult."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from toolfleet.shared.context import ToolContext, ToolServices
from toolfleet.shared.errors import ToolError
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult, error_response
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)

_loop: asyncio.AbstractEventLoop | None = None

# How long the tasks a coroutine tool leaves behind get to finish cancelling. It runs after
# the soft time limit and before the result is posted, all before the hard limit (the soft
# one + 1 s, see toolfleet.workers.tasks) ends the process.
DRAIN_TIMEOUT_S = 0.5

# State values must survive json.dumps: the orchestrator stores each one with it.
_ADVICE = (
    "write only JSON values (str, int, float, bool, None, and lists and dicts of them) "
    "to tool_context.state: convert others first (a datetime with .isoformat(), say)"
)
# How many of the largest state keys an over-limit message names.
_NAMED_KEYS = 5


def _event_loop() -> asyncio.AbstractEventLoop:
    # One loop per worker process (prefork children each get their own after fork); it
    # outlives a call, so clients a tool keeps for the loop stay usable, but no task does.
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


def _run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine tool to its end on this process's loop; leave nothing of it there.

    The soft time limit is raised by a signal handler wherever the process is: for a tool
    awaiting something that is the loop's select(), so the exception leaves
    run_until_complete with the tool's task still scheduled - it would resume inside the
    next call. So after every run (a value, an exception or an interruption) the tasks
    left on the loop - the tool's and any it started - are cancelled and drained."""
    loop = _event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        _drain(loop)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task on `loop` and let them finish, for DRAIN_TIMEOUT_S at most; if any
    is still pending then (it swallowed its cancellation), or the drain is interrupted, drop
    the loop instead."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    try:
        # Again until none is left: a cancelled task may start another (an async
        # generator's finalizer, a cleanup task).
        while pending := asyncio.all_tasks(loop):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.error(
                    "%d task(s) of a coroutine tool ignored cancellation for %g s: closing "
                    "this process's event loop (the next call gets a new one): %s",
                    len(pending),
                    DRAIN_TIMEOUT_S,
                    ", ".join(sorted(repr(t.get_coro()) for t in pending)),
                )
                _drop(loop, pending)
                return
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.wait(pending, timeout=remaining))
    except BaseException:  # the soft time limit during the drain, say: the loop is not clean
        _drop(loop, asyncio.all_tasks(loop))
        raise


def _drop(loop: asyncio.AbstractEventLoop, stuck: set[asyncio.Task[Any]]) -> None:
    """Close `loop` for good: its tasks never run again (the next call gets a new loop)."""
    global _loop
    for task in stuck:
        # Close each coroutine now (its `finally` blocks run here, in this call), rather
        # than at garbage collection, in whatever call is running then.
        coro = task.get_coro()
        try:
            coro.close()
        except Exception:
            log.exception("closing a task left by a coroutine tool failed: %r", coro)
    loop.close()
    if _loop is loop:
        _loop = None


@dataclass(frozen=True)
class Outcome:
    """The result to report, and the exception that caused an error result (for retries)."""

    result: ToolResult
    exception: BaseException | None = None


def execute(
    tool: FunctionTool,
    call: ToolCall,
    *,
    worker: str,
    attempt: int = 1,
    max_result_bytes: int,
    time_limit_s: float = 0.0,
    services: ToolServices | None = None,
) -> Outcome:
    """Run `tool` for `call` in this worker process and describe the outcome as a ToolResult.

    Arguments are validated again here; coroutine tools run on this process's event loop,
    and no task of theirs is left on it afterwards. Exceptions become ERROR results (the
    exception kept for retries), as do a soft time limit and a response or state writes
    that are not JSON or together over `max_result_bytes` (ResultRejected, no state delta).
    A long-running tool's response is PENDING: its ticket."""
    started = time.time()
    context = ToolContext(call, services)

    def finish(
        status: CallStatus, response: dict[str, Any], exc: BaseException | None = None
    ) -> Outcome:
        state_delta = context.state.delta
        problem = _unsendable(response, state_delta, max_result_bytes)
        if problem:
            log.error(
                "tool %s returned an unsendable result (call %s): %s",
                call.tool,
                call.call_id,
                problem,
            )
            if status is CallStatus.ERROR:  # keep what the model would have been told
                problem += f" (the call failed too: {response.get('error_type')}: "
                problem += f"{response.get('error_message')})"
            status, response = CallStatus.ERROR, error_response("ResultRejected", problem)
            state_delta, exc = {}, None  # nothing of it travels; running again would not help
        result = ToolResult(
            call_id=call.call_id,
            tool=call.tool,
            session_id=call.session_id,
            invocation_id=call.invocation_id,
            status=status,
            response=response,
            state_delta=state_delta,
            actions=context.actions,
            worker=worker,
            pid=os.getpid(),
            started_at=started,
            finished_at=time.time(),
            attempt=attempt,
        )
        return Outcome(result, exc)

    # The orchestrator validated these already; a worker trusts nothing it did not check.
    args, problems = tool.validate(call.args)
    if problems:
        detail = "; ".join(str(p) for p in problems)
        return finish(CallStatus.ERROR, error_response("InvalidArguments", detail))
    if tool.signature.context_param:
        args[tool.signature.context_param] = context
    try:
        value = tool.func(**args)
        if asyncio.iscoroutine(value):
            value = _run_coroutine(value)
    except ToolError as exc:
        return finish(CallStatus.ERROR, error_response("ToolError", str(exc)), exc)
    except SoftTimeLimitExceeded as exc:
        message = f"tool {tool.name!r} exceeded its time limit of {time_limit_s:g} s"
        return finish(CallStatus.ERROR, error_response("TimeoutError", message), exc)
    except Exception as exc:
        log.exception("tool %s failed (call %s)", call.tool, call.call_id)
        return finish(CallStatus.ERROR, error_response(type(exc).__name__, str(exc)), exc)

    response = value if isinstance(value, dict) else {"result": value}
    status = CallStatus.PENDING if tool.is_long_running else CallStatus.SUCCESS
    return finish(status, response)


def _json_size(value: Any) -> int:
    return len(json.dumps(value).encode())


def _unstorable(state_delta: dict[str, Any]) -> list[str]:
    """Each state key whose write cannot be sent and stored, with why."""
    bad = []
    for key, value in state_delta.items():
        if not isinstance(key, str):
            bad.append(f"{key!r} (a key must be a string)")
            continue
        try:
            _json_size(value)
        except (TypeError, ValueError) as exc:
            bad.append(f"{key!r} ({exc})")
    return bad


def _unsendable(response: dict[str, Any], state_delta: dict[str, Any], limit: int) -> str | None:
    """Why a result cannot be posted, or None: its response or a state write is not JSON, or
    both together are over `limit` bytes.

    One limit for the two together, not one each: they travel in one message, and the
    state writes are then copied into every later call's envelope. Counted apart, a tool
    could send twice the limit, or get past it by moving data from its response to state."""
    try:
        response_size = _json_size(response)
    except (TypeError, ValueError) as exc:
        return f"the tool's result is not JSON-serializable: {exc}"
    try:
        # A key that is not a string would not even make a ToolResult.
        storable = all(isinstance(key, str) for key in state_delta)
        state_size = _json_size(state_delta) if storable and state_delta else 0
    except (TypeError, ValueError):
        storable = False
    if not storable:
        bad = ", ".join(_unstorable(state_delta))
        return f"the tool's state writes are not JSON-serializable: {bad}; {_ADVICE}"
    size = response_size + state_size
    if size <= limit:
        return None
    if not state_size:
        return f"the tool's result is {size} bytes, over the {limit}-byte limit; return less data"
    by_size = sorted(((_json_size(v), k) for k, v in state_delta.items()), reverse=True)
    named = ", ".join(f"{k!r} {n} bytes" for n, k in by_size[:_NAMED_KEYS])
    more = f" and {len(by_size) - _NAMED_KEYS} more" if len(by_size) > _NAMED_KEYS else ""
    return (
        f"the tool's result and state writes are {size} bytes together, over the "
        f"{limit}-byte limit (result {response_size} bytes; state keys {named}{more}); "
        "write less to tool_context.state: keep large data elsewhere (an artifact, say) "
        "and store a reference to it"
    )
