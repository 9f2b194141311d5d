"""Support ticket agent: the ticket is worked on in the background and the agent
resumes by itself when it is resolved (no user action).

`create_ticket_long_running` opens the ticket and schedules `resolve_ticket`, a job on
the `tickets` pool, which posts the final status a few seconds later.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from toolfleet import (
    Agent,
    Call,
    JobContext,
    LongRunningFunctionTool,
    ScriptView,
    Step,
    ToolContext,
    job,
    say,
)

# Seconds until the background job resolves a ticket (the demo and tests shorten it).
RESOLVE_AFTER_S = float(os.environ.get("TOOLFLEET_TICKET_RESOLVE_AFTER_S", "3"))


@job(pool="tickets")
def resolve_ticket(call_id: str, ticket_id: str, issue: str, job_context: JobContext) -> None:
    """Works the ticket (here: decides a resolution) and posts the final result."""
    resolution = f"Reset the account linked to the issue '{issue}' and confirmed it works."
    job_context.post_result(
        call_id, {"status": "resolved", "ticket_id": ticket_id, "resolution": resolution}
    )


def create_ticket_long_running(issue: str, tool_context: ToolContext) -> dict[str, Any]:
    """Opens a support ticket; a support engineer works on it in the background.

    Args:
        issue: A one-line description of the customer's problem.

    Returns:
        {'status': 'pending', 'ticket_id': ...} at once; the final result
        {'status': 'resolved', 'ticket_id': ..., 'resolution': ...} arrives later.
    """
    ticket_id = f"TCK-{uuid.uuid4().hex[:6].upper()}"
    tool_context.schedule_job(
        resolve_ticket,
        delay_s=RESOLVE_AFTER_S,
        call_id=tool_context.function_call_id,
        ticket_id=ticket_id,
        issue=issue,
    )
    return {"status": "pending", "ticket_id": ticket_id, "eta_s": RESOLVE_AFTER_S}


ticket_tool = LongRunningFunctionTool(create_ticket_long_running)


def _open(view: ScriptView) -> Step:
    return Step(calls=[Call("create_ticket_long_running", {"issue": view.user_text[:120]})])


def _opened(view: ScriptView) -> str:
    return f"I opened ticket {view.response('create_ticket_long_running')['ticket_id']}; I'll update you."


def _resolved(view: ScriptView) -> str:
    result = view.response("create_ticket_long_running")
    return f"Ticket {result['ticket_id']} is {result['status']}: {result['resolution']}"


agent = Agent(
    name="support_agent",
    instruction=(
        "You help customers with account problems. Open a ticket with "
        "create_ticket_long_running for any problem you cannot solve; tell the customer the "
        "ticket id, and when the ticket's final status arrives, tell them the resolution."
    ),
    description="Opens support tickets and reports their resolution.",
    tools=[ticket_tool],
    offline_script=[_open, say(_opened), say(_resolved)],
)
