"""A tea shop's order desk whose answer, after checking the menu with tools, must be
a structured order.

Exercises output_schema on an agent that also has tools: ADK (off Vertex AI) offers
the model a set_model_response function whose call gives the final structured answer.
"""

from pydantic import BaseModel

from toolfleet.adk import Agent


class TeaOrder(BaseModel):
    """An order the kitchen can make."""

    tea: str
    cups: int


def list_teas() -> list[str]:
    """The teas on the menu today."""
    return ["green", "oolong", "rooibos"]


root_agent = Agent(
    name="order_desk",
    model="gemini-2.0-flash",
    description="Takes tea orders.",
    instruction="Check the menu with list_teas, then give the order.",
    tools=[list_teas],
    output_schema=TeaOrder,
    output_key="order",
)
