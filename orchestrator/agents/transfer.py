"""ADK's automatic `transfer_to_agent`: declared to every agent that has somewhere to
transfer to, and answered by the orchestrator itself (it needs no worker).

The targets are ADK's: the agent's sub-agents, its parent and its peers (the parent's
other sub-agents), less what `disallow_transfer_to_parent`/`_peers` rule out. The call
gets a function response like any other, stored with the turn's other responses in
the same step, and the conversation continues with the target agent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.structured import structured_answer_tool
from toolfleet.orchestrator.agents.workflow import WorkflowAgent
from toolfleet.shared.context import ToolContext
from toolfleet.shared.messages import (
    CallStatus,
    ToolActions,
    ToolCall,
    ToolResult,
    answered_result,
    error_result,
)
from toolfleet.shared.tools import FunctionTool, ToolRegistry
from toolfleet.shared.toolsets import ReadonlyContext

TRANSFER_TO_AGENT = "transfer_to_agent"


def transfer_to_agent(agent_name: str, tool_context: ToolContext) -> None:
    """Transfer the question to another agent.

    This tool hands off control to another agent when it's more suitable to answer the
    user's question according to the agent's description.

    Args:
        agent_name: The name of the agent to transfer to.
    """
    # The declaration's source, as ADK's is; the orchestrator answers the call itself
    # (`answer_transfer`), so this body runs only if someone calls it directly.
    tool_context.actions.transfer_to_agent = agent_name


@dataclass(frozen=True, eq=False)
class TransferTool(FunctionTool):
    """`transfer_to_agent` for one agent: its declaration lists the agents it may name."""

    # Answered in the orchestrator (loop.turn): never sent to a worker nor registered
    # on one, since Agent.all_tools does not list it.
    targets: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        """The agent_name argument, limited to this agent's targets."""
        schema = dict(self.signature.parameters_json_schema)
        properties = dict(schema["properties"])
        properties["agent_name"] = {**properties["agent_name"], "enum": list(self.targets)}
        return {**schema, "properties": properties}


def transfer_targets(agent: Agent) -> list[Agent]:
    """The agents `agent` may transfer to, as in ADK: sub-agents, then the parent, then
    the peers (each unless the agent disallows it, or the parent is a workflow agent)."""
    targets = list(agent.sub_agents)
    parent = agent.parent
    if parent is None or isinstance(parent, WorkflowAgent):  # ADK: an LLM parent only
        return targets
    if not agent.disallow_transfer_to_parent:
        targets.append(parent)
    if not agent.disallow_transfer_to_peers:
        targets.extend(p for p in parent.sub_agents if p is not agent)
    return targets


def transfer_tool(agent: Agent) -> TransferTool | None:
    """The agent's `transfer_to_agent`, or None when it has nowhere to transfer to."""
    targets = tuple(a.name for a in transfer_targets(agent))
    return _transfer_tool_to(targets) if targets else None


@functools.lru_cache(maxsize=1024)
def _transfer_tool_to(targets: tuple[str, ...]) -> TransferTool:
    """One tool per set of targets (it is immutable): building a FunctionTool describes
    its function's signature, which every model step would otherwise do again."""
    return TransferTool(transfer_to_agent, TRANSFER_TO_AGENT, targets=targets)


async def offered_tools(agent: Agent, context: Callable[[], ReadonlyContext]) -> ToolRegistry:
    """What the model is offered: the agent's tools, plus `transfer_to_agent` when it has
    somewhere to transfer to, and `set_model_response` when it has an output schema and
    tools (each unless one of its own tools has that name). `context`:
    as `Agent.tools_for` takes it."""
    tools = await agent.tools_for(context)
    automatic = [transfer_tool(agent), structured_answer_tool(agent, bool(tools))]
    added = [t for t in automatic if t is not None and t.name not in tools]
    return ToolRegistry([*tools.values(), *added]) if added else tools


def transfer_instruction(agent: Agent) -> str:
    """What the model is told about its transfer targets (appended to its instruction)."""
    targets = transfer_targets(agent)
    if not targets:
        return ""
    listed = "\n".join(
        f"Agent name: {a.name}\nAgent description: {a.description or '(none)'}\n" for a in targets
    )
    lines = [
        "You can hand the conversation to one of these agents:",
        "",
        listed,
        "If you are the best agent to answer the question according to your description, "
        "answer it yourself. If another agent is better for it according to its "
        f"description, call the `{TRANSFER_TO_AGENT}` function with that agent's name, "
        "and write no other text with the call.",
    ]
    parent = agent.parent
    if parent is not None and not agent.disallow_transfer_to_parent:
        lines.append(
            f"Your parent agent is {parent.name}. If neither you nor the other agents fit "
            "the question, transfer to your parent agent."
        )
    return "\n".join(lines)


def answer_transfer(call: ToolCall, tool: TransferTool, agent_name: str) -> ToolResult:
    """The response to a `transfer_to_agent` call, made here: ADK's (the function returns
    nothing) with the transfer as its action; an error for the model if the name is not
    one of the targets."""
    if agent_name not in tool.targets:
        return error_result(
            call,
            "UnknownAgent",
            f"there is no agent named {agent_name!r} to transfer to; transfer to one of: "
            f"{', '.join(tool.targets)}",
            worker="orchestrator",
        )
    return answered_result(
        call,
        CallStatus.SUCCESS,
        {"result": None},
        actions=ToolActions(transfer_to_agent=agent_name),
        worker="orchestrator",
    )
