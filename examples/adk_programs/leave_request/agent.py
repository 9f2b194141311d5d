"""A leave desk: asks a manager to approve leave and books it once approved.

Exercises a long-running tool (human in the loop): its first answer says the request
is pending, and the program later sends the manager's decision as a FunctionResponse
to the same call, which the agent then acts on.
"""

from typing import Any

from toolfleet.adk import Agent, LongRunningFunctionTool


def ask_manager(days: int, reason: str) -> dict[str, Any]:
    """Ask the manager to approve days of leave; the answer comes later.

    Args:
        days: How many working days of leave.
        reason: Why the leave is wanted.
    """
    return {"status": "pending", "days": days, "ticket": f"LV-{days}{len(reason)}"}


def book_leave(days: int) -> dict[str, Any]:
    """Put approved leave in the calendar.

    Args:
        days: How many working days to book.
    """
    return {"booked": days, "remaining_allowance": 25 - days}


root_agent = Agent(
    name="leave_desk",
    model="gemini-2.0-flash",
    description="Handles requests for leave.",
    instruction=(
        "Ask the manager with ask_manager before booking any leave. Book it with "
        "book_leave only once the manager's answer says approved."
    ),
    tools=[LongRunningFunctionTool(func=ask_manager), book_leave],
)
