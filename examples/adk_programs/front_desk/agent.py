"""A hotel front desk that hands guests over to a booking clerk or a concierge.

Exercises transfer between agents: the desk transfers to a sub-agent, a sub-agent
transfers to its sibling, and each agent is shown the others' turns as context.
"""

from typing import Any

from toolfleet.adk import Agent, ToolContext

RATE_PER_NIGHT = 120


def reserve_room(nights: int, tool_context: ToolContext) -> dict[str, Any]:
    """Reserve a double room.

    Args:
        nights: How many nights to stay.
    """
    tool_context.state["reserved_nights"] = nights
    return {"confirmation": f"HX-{nights:03d}", "total": nights * RATE_PER_NIGHT}


def opening_hours(place: str) -> str:
    """When one of the hotel's places is open.

    Args:
        place: "breakfast room", "pool" or "gym".
    """
    hours = {"breakfast room": "7:00-10:30", "pool": "8:00-20:00", "gym": "always"}
    return hours.get(place, "unknown")


booking_clerk = Agent(
    name="booking_clerk",
    model="gemini-2.0-flash",
    description="Reserves rooms.",
    instruction="Reserve rooms with reserve_room. Hand other questions to the concierge.",
    tools=[reserve_room],
)

concierge = Agent(
    name="concierge",
    model="gemini-2.0-flash",
    description="Answers questions about the hotel's places and their hours.",
    instruction="Answer questions about the hotel with opening_hours.",
    tools=[opening_hours],
)

root_agent = Agent(
    name="front_desk",
    model="gemini-2.0-flash",
    description="Greets guests and sends them to the right colleague.",
    instruction="Send booking requests to booking_clerk and questions to concierge.",
    sub_agents=[booking_clerk, concierge],
)
