"""Run one tool for one call envelope and turn the outcome into a ToolResult."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from toolfleet.shared.context import ToolContext, ToolServices
from toolfleet.shared.errors import ToolError
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult, error_response
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)

_loop: asyncio.AbstractEventLoop | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    # One loop per worker process (prefork children each get their own after fork).
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


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

    Arguments are validated again here; coroutine tools run on this process's event loop.
    Exceptions become ERROR results (the exception kept for retries), as do a soft time limit
    and a response that is not JSON or over `max_result_bytes`. A long-running tool's
    response is PENDING: its ticket."""
    started = time.time()
    context = ToolContext(call, services)

    def finish(
        status: CallStatus, response: dict[str, Any], exc: BaseException | None = None
    ) -> Outcome:
        result = ToolResult(
            call_id=call.call_id,
            tool=call.tool,
            session_id=call.session_id,
            invocation_id=call.invocation_id,
            status=status,
            response=response,
            state_delta=context.state.delta,
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
            value = _event_loop().run_until_complete(value)
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
    problem = _unsendable(response, max_result_bytes)
    if problem:
        log.error(
            "tool %s returned an unsendable result (call %s): %s", call.tool, call.call_id, problem
        )
        return finish(CallStatus.ERROR, error_response("ResultRejected", problem))
    return finish(status, response)


def _unsendable(response: dict[str, Any], limit: int) -> str | None:
    try:
        size = len(json.dumps(response).encode())
    except (TypeError, ValueError) as exc:
        return f"the tool's result is not JSON-serializable: {exc}"
    if size > limit:
        return f"the tool's result is {size} bytes, over the {limit}-byte limit; return less data"
    return None
