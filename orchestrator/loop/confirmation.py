"""Asking a person before a call runs: FunctionTool(require_confirmation=...).

Decided on the orchestrator, before dispatch (shared.confirmation_check, which a worker
asks again before a call runs): a call that needs a confirmation is not sent; its turn
is parked (loop.parking) with the confirmation request, and the call is sent once a
person confirms it (completions.applier), with their answer in
`tool_context.tool_confirmation`.
"""

from __future__ import annotations

import logging
from typing import Any

from toolfleet.orchestrator.fleet.protocol import failed
from toolfleet.shared.confirmation import ToolConfirmation
from toolfleet.shared.confirmation_check import confirmed, needs_confirmation
from toolfleet.shared.messages import CallStatus, ToolActions, ToolCall, ToolResult, answered_result
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)

AWAITING = {"status": "awaiting_confirmation"}  # the parked result's response (not shown)
GATE = "orchestrator"  # the worker named on a call held back here


async def ask_confirmation(
    tool: FunctionTool, call: ToolCall, args: dict[str, Any]
) -> ToolResult | None:
    """The parked result asking for a confirmation when `call` needs one and has none
    yet; None to send it now. An error result when the tool's check itself fails."""
    if confirmed(call) or not tool.require_confirmation:
        return None
    try:
        needed = await needs_confirmation(tool, call, args)
    except Exception as exc:
        log.exception("require_confirmation of %s failed (call %s)", tool.name, call.call_id)
        return failed(
            call,
            "ConfirmationCheckError",
            f"checking whether {tool.name!r} needs a confirmation failed "
            f"({type(exc).__name__}); the call was not run",
        )
    if not needed:
        return None
    asked = ToolConfirmation(  # ADK's words
        hint=f"Please approve or reject the tool call {tool.name}() by responding with a "
        "FunctionResponse with an expected ToolConfirmation payload."
    )
    actions = ToolActions(requested_confirmation=asked.model_dump(mode="json"))
    return answered_result(call, CallStatus.SUCCESS, dict(AWAITING), worker=GATE, actions=actions)
