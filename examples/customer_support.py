"""A tool hands the conversation to another agent (ADK "transfer_to_agent").

Run: toolfleet run --agent examples.customer_support:main_agent "This is urgent: I can't log in"
"""

from __future__ import annotations

from toolfleet import Agent, Call, ScriptView, Step, ToolContext, say


def check_and_transfer(query: str, tool_context: ToolContext) -> str:
    """Checks if the query requires escalation and transfers to another agent if needed.

    Args:
        query: The user's request, as they wrote it.
    """
    if "urgent" in query.lower():
        tool_context.actions.transfer_to_agent = "support_agent"
        return "Transferring to the support agent..."
    return f"Processed query: '{query}'. No further action needed."


def _check(view: ScriptView) -> Step:
    return Step(calls=[Call("check_and_transfer", {"query": view.user_text})])


support_agent = Agent(
    name="support_agent",
    instruction=(
        "You are the dedicated support agent. Mention you are a support handler and "
        "please help the user with their urgent issue."
    ),
    description="Handles urgent support requests.",
    offline_script=[say(lambda view: f"Support handler here: I'm on it - {view.user_text}")],
)

main_agent = Agent(
    name="main_agent",
    instruction=(
        "You are the first point of contact for customer support of an analytics tool. "
        "Answer general queries. If the user indicates urgency, use the 'check_and_transfer' tool."
    ),
    description="First point of contact for customer support.",
    tools=[check_and_transfer],
    sub_agents=[support_agent],
    offline_script=[_check, say(lambda view: str(view.response("check_and_transfer")["result"]))],
)
