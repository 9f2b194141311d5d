"""Whether a call needs a person's confirmation before it runs: FunctionTool(
require_confirmation=True, or a check of the call's arguments, as ADK allows).

One decision, made twice: by the orchestrator before it sends a call (loop.confirmation:
the call waits as a ticket) and by the worker before it runs one (workers.executor): a
call that needs a confirmation and arrives without one is refused there, whichever way
it was sent.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from toolfleet.shared.context import ToolContext
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.tools import FunctionTool


def confirmed(call: ToolCall) -> bool:
    """Whether the call carries a person's yes (a rejected call is never sent)."""
    return bool(call.confirmation) and (call.confirmation or {}).get("confirmed") is True


async def needs_confirmation(tool: FunctionTool, call: ToolCall, args: dict[str, Any]) -> bool:
    """Whether `call` may run only once confirmed: True, or what the tool's check answers
    for these (validated) arguments; ADK passes the arguments, and the tool context to a
    check that takes one. The check's own exception propagates."""
    check = tool.require_confirmation
    if not callable(check):
        return bool(check)
    kwargs = dict(args)
    if "tool_context" in inspect.signature(check).parameters:
        kwargs["tool_context"] = ToolContext(call)
    answer = check(**kwargs)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


def refusal_to_run(tool: FunctionTool, call: ToolCall, args: dict[str, Any]) -> str | None:
    """On a worker, before the tool runs: why the call may not run (it needs a
    confirmation it does not carry, or the check failed); None when it may. Runs the
    check on this thread, which has no event loop running (a worker's)."""
    if not tool.require_confirmation or confirmed(call):
        return None
    try:
        needed = asyncio.run(needs_confirmation(tool, call, args))
    except Exception as exc:  # a check that cannot decide does not let the call through
        return (
            f"checking whether {tool.name!r} needs a confirmation failed "
            f"({type(exc).__name__}); the call was not run"
        )
    if not needed:
        return None
    return (
        f"{tool.name!r} runs only once a person confirmed the call, and this call came "
        "without a confirmation; it was not run"
    )
