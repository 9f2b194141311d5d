"""A trivia helper run through the runner's run_debug, quietly and verbosely.

Exercises InMemoryRunner.run_debug: it sends each message in one debug session and
prints the answers, and with verbose=True the tool calls and results too.
"""

from toolfleet.adk import Agent, ToolContext

CAPITALS = {"Peru": "Lima", "Kenya": "Nairobi", "Laos": "Vientiane"}


def capital_of(country: str, tool_context: ToolContext) -> str:
    """The capital city of a country.

    Args:
        country: The country's English name.
    """
    asked = list(tool_context.state.get("countries_asked", []))
    tool_context.state["countries_asked"] = [*asked, country]
    return CAPITALS.get(country, "unknown")


root_agent = Agent(
    name="trivia",
    model="gemini-2.0-flash",
    description="Answers trivia questions.",
    instruction="Answer questions about capitals with capital_of.",
    tools=[capital_of],
)
