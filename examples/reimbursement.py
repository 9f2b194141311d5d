"""Reimbursement agent with a human approval step (ADK "Long Running Function Tools").

Under $100 the agent reimburses at once; above, `ask_for_approval` opens an approval
ticket and the agent waits. Approve or reject it from another terminal:

    toolfleet tickets list
    toolfleet tickets approve <call-id>      # or: reject <call-id>
"""

from __future__ import annotations

import re
from typing import Any

from toolfleet import Agent, Call, LongRunningFunctionTool, ScriptView, Step, ToolContext, say

APPROVAL_LIMIT_USD = 100.0


def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a manager for approval of a reimbursement.

    Args:
        purpose: What the money was spent on.
        amount: The amount in US dollars.

    Returns:
        {'status': 'pending', 'ticket_id': ...} while the approver decides; later the
        final result {'status': 'approved'} or {'status': 'rejected'}.
    """
    # A real tool would open a ticket and notify the approver with a link to it.
    return {
        "status": "pending",
        "approver": "Sean Zhou",
        "purpose": purpose,
        "amount": amount,
        "ticket_id": f"approval-{tool_context.function_call_id[-8:]}",
    }


def reimburse(purpose: str, amount: float) -> dict[str, str]:
    """Reimburse the amount of money to the employee.

    Args:
        purpose: What the money was spent on.
        amount: The amount in US dollars.
    """
    # A real tool would send the request to the payment vendor.
    return {"status": "ok", "paid": f"${amount:.2f} for {purpose}"}


approval_tool = LongRunningFunctionTool(ask_for_approval)

# Offline script: rules on the message's "$" amount, and on the approval's status.
_AMOUNT = re.compile(r"\$?\s*(\d+(?:\.\d+)?)\s*\$?")


def _request(view: ScriptView) -> dict[str, Any]:
    match = _AMOUNT.search(view.user_text)
    amount = float(match.group(1)) if match else 0.0
    purpose = "meals" if "meal" in view.user_text.lower() else "expenses"
    return {"purpose": purpose, "amount": amount}


def _first(view: ScriptView) -> Step:
    request = _request(view)
    tool = "reimburse" if request["amount"] < APPROVAL_LIMIT_USD else "ask_for_approval"
    return Step(calls=[Call(tool, request)])


def _after_first(view: ScriptView) -> Step:
    if view.responses and view.responses[0][0] == "reimburse":
        return say(f"Done: {view.response('reimburse')['paid']} has been reimbursed.")
    ticket = view.response("ask_for_approval")
    return say(
        f"Your request is above ${APPROVAL_LIMIT_USD:.0f}, so I asked {ticket.get('approver')} "
        f"for approval (ticket {ticket.get('ticket_id')}). I will continue once they decide."
    )


def _after_decision(view: ScriptView) -> Step:
    decision = view.response("ask_for_approval")
    if decision.get("status") == "approved":
        return Step(calls=[Call("reimburse", _request(view))])
    return say(
        f"Your reimbursement was {decision.get('status', 'not approved')}; nothing was paid."
    )


def _after_payment(view: ScriptView) -> Step:
    return say(f"Approved and paid: {view.response('reimburse')['paid']}.")


agent = Agent(
    name="reimbursement_agent",
    instruction=(
        "You are an agent whose job is to handle the reimbursement process for employees. "
        f"If the amount is less than ${APPROVAL_LIMIT_USD:.0f}, call reimburse() directly. "
        f"If the amount is greater than ${APPROVAL_LIMIT_USD:.0f}, call ask_for_approval(); "
        "while it is pending, tell the employee and do not call it again. If it is approved, "
        "call reimburse(); if rejected, tell the employee."
    ),
    description="Handles reimbursements, with manager approval above $100.",
    tools=[reimburse, approval_tool],
    offline_script=[_first, _after_first, _after_decision, _after_payment],
)
