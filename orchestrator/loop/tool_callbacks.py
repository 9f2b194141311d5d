"""Tool callbacks around one turn's calls, on the orchestrator: before a call is
dispatched (it may be answered there and then), and once its final response is in
(an error first goes to on_tool_error; after_tool may replace any response)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from toolfleet.orchestrator.fleet.protocol import failed
from toolfleet.orchestrator.loop.callbacks import TOOL_HOOKS, Hooks
from toolfleet.orchestrator.plugins.context import ToolCallError
from toolfleet.shared.context import ToolContext
from toolfleet.shared.messages import (
    CallStatus,
    ToolActions,
    ToolCall,
    ToolResult,
    answered_result,
    error_response,
)
from toolfleet.shared.state import State
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)


@dataclass
class _Guarded:
    """A call that went through before_tool: what its later callbacks are given."""

    tool: FunctionTool
    args: dict[str, Any]
    context: ToolContext
    snapshot: dict[str, Any]  # the state the call was sent with (before_tool's writes in)
    before_delta: dict[str, Any]


class ToolCallbacks:
    """The tool callbacks of one turn. A callback that raises does not end the turn: its
    call is answered with a CallbackError (the traceback goes to the log)."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks
        self._calls: dict[str, _Guarded] = {}
        self.active = hooks.any_of(TOOL_HOOKS)  # if not, results pass through as they are

    async def before(
        self, tool: FunctionTool, call: ToolCall, args: dict[str, Any]
    ) -> ToolResult | None:
        """The call's answer if a callback gives one (it is then never dispatched); None
        to dispatch it. What before_tool writes to state reaches the worker's snapshot."""
        if not self.active:
            return None
        context = ToolContext(call)
        try:
            answer = await self._hooks.before_tool(tool, args, context)
        except Exception as exc:
            log.exception("before_tool_callback failed for call %s (%s)", call.call_id, tool.name)
            return failed(call, "CallbackError", _failure("before_tool_callback", tool, exc))
        call.state.update(context.state.delta)
        self._calls[call.call_id] = _Guarded(
            tool, args, context, dict(call.state), context.state.delta
        )
        if answer is None:
            return None
        return answered_result(
            call, status_of(answer), answer, worker="orchestrator", actions=context.actions
        )

    async def finish(self, result: ToolResult) -> ToolResult:
        """The result as the model will get it: on_tool_error and after_tool applied to a
        final response, before_tool's state writes merged in (under the tool's)."""
        guarded = self._calls.get(result.call_id)
        if guarded is None:
            return result  # refused before the callbacks (unknown tool, bad arguments)
        delta = {**guarded.before_delta, **result.state_delta}
        if result.status is CallStatus.PENDING or result.actions.waits():
            # Not final (a ticket, or waiting for the user): its final response is
            # applied later, without callbacks.
            return result.model_copy(update={"state_delta": delta})
        context = guarded.context
        context.state = State({**guarded.snapshot, **result.state_delta})  # what the tool left
        response: dict[str, Any] = result.response
        status: CallStatus = result.status
        # ADK hands after_tool what the tool returned: the value itself, not the
        # {"result": value} the model gets.
        returned: Any = response[RESULT_KEY] if result.wrapped else response
        try:
            if status is CallStatus.ERROR:
                error = ToolCallError(
                    str(response.get("error_type", "Error")),
                    str(response.get("error_message", "")),
                    response,
                )
                handled = await self._hooks.on_tool_error(
                    guarded.tool, guarded.args, context, error
                )
                if handled is not None:
                    response, status = handled, status_of(handled)
                    returned = handled
            replaced = await self._hooks.after_tool(guarded.tool, guarded.args, context, returned)
            if replaced is not None:  # any value, as ADK takes it: a dict is the response
                response = replaced if isinstance(replaced, dict) else {RESULT_KEY: replaced}
                status = status_of(response)
        except Exception as exc:
            log.exception("a tool callback failed for call %s (%s)", result.call_id, result.tool)
            message = _failure("after_tool_callback/on_tool_error_callback", guarded.tool, exc)
            response, status = error_response("CallbackError", message), CallStatus.ERROR
        return result.model_copy(
            update={
                "response": response,
                "status": status,
                "state_delta": {**delta, **context.state.delta},
                "actions": _merged(result.actions, context.actions),
            }
        )


# The key a value that is not a dict is sent under, as ADK's FunctionResponse has it.
RESULT_KEY = "result"


def status_of(response: dict[str, Any]) -> CallStatus:
    """A callback's response is an error when it says so, as the tools' error responses do."""
    return CallStatus.ERROR if response.get("status") == "error" else CallStatus.SUCCESS


def _merged(result: ToolActions, context: ToolActions) -> ToolActions:
    """The tool's actions, with those a callback set on its context added."""
    return result.model_copy(
        update={
            k: v
            for k, v in context.model_dump().items()
            if v and k not in ("requested_auth", "requested_confirmation")
        }
    )


def _failure(hook: str, tool: FunctionTool, exc: Exception) -> str:
    return (
        f"a {hook} around {tool.name!r} failed ({type(exc).__name__}); the call was not "
        "answered by its tool"
    )
