"""A museum visit log whose tool, called several times in one turn, appends to one
list in the session state.

Exercises calls of one turn that each change the same state key: on ADK they share
one state, so every append is kept.
"""

from typing import Any

from toolfleet.adk import Agent, ToolContext


def log_visit(museum: str, tool_context: ToolContext) -> dict[str, Any]:
    """Record a visit to a museum.

    Args:
        museum: The museum's name.
    """
    visits = tool_context.state.setdefault("visits", [])
    visits.append(museum)
    tool_context.state["visits"] = visits
    return {"logged": museum}


root_agent = Agent(
    name="visit_log",
    model="gemini-2.0-flash",
    description="Logs museum visits.",
    instruction="Log every museum the user visited with log_visit, one call each.",
    tools=[log_visit],
)
