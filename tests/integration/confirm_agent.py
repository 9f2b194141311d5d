"""An agent whose tools need a person's confirmation, for `toolfleet mcp serve --agent`
(its tools live in confirm_tools, which the workers load)."""

from __future__ import annotations

from tests.integration.confirm_tools import (
    book_trip_tool,
    transfer_checked_tool,
    transfer_money_tool,
)
from toolfleet.orchestrator.agents.agent import Agent

agent = Agent(
    name="banker",
    instruction="Move money when asked.",
    tools=[transfer_money_tool, transfer_checked_tool, book_trip_tool],
)
