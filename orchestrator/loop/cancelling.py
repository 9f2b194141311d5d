"""What a cancelled turn leaves: nothing waiting (unless its tickets are to be kept)."""

from __future__ import annotations

from toolfleet.shared.cancellation import cancelled_response
from toolfleet.shared.messages import CallStatus, ToolActions, ToolResult


def closed_by_cancel(result: ToolResult) -> ToolResult:
    """A result of a cancelled turn as stored: one that would leave the call waiting (a
    ticket, a credential or confirmation request) is closed with a Cancelled error."""
    if result.status is not CallStatus.PENDING and not result.actions.waits():
        return result
    return result.model_copy(
        update={
            "status": CallStatus.ERROR,
            "response": cancelled_response(result.tool),
            "worker": "orchestrator",
            "actions": ToolActions(),
        }
    )
