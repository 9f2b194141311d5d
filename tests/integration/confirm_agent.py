"""Agents whose tools need a person's confirmation: one for `toolfleet mcp serve --agent`,
and one behind an AgentTool whose child calls such a tool on the agents pool (the
workers load this module; the tools live in confirm_tools)."""

from __future__ import annotations

from tests.integration.confirm_tools import (
    book_trip_tool,
    transfer_checked_tool,
    transfer_money_tool,
)
from toolfleet.orchestrator.agent_tool import AgentTool
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, say

agent = Agent(
    name="banker",
    instruction="Move money when asked.",
    tools=[transfer_money_tool, transfer_checked_tool, book_trip_tool],
)


def _pay(view: ScriptView) -> Step:
    """The child moves 5000, counting runs in the file its request names."""
    return Step(calls=[Call("transfer_money", {"amount": 5000, "counter_file": view.user_text})])


# The child of an AgentTool: its loop runs on a worker of the agents pool.
payer = Agent(
    name="confirming_payer",
    model="gemini-2.0-flash",
    description="Moves money.",
    tools=[transfer_money_tool],
    offline_script=[_pay, say("paid")],
)
payer_tool = AgentTool(agent=payer)
