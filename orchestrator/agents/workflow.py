"""ADK's workflow agents: SequentialAgent, ParallelAgent and LoopAgent.

They call no model themselves; they run their sub-agents (LLM agents or other workflow
agents) in an order, over the invocation's session (orchestrator.loop.workflow). Each
LLM sub-agent's tool calls go to the fleet as any agent's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolfleet.orchestrator.agents.agent import Agent, Callbacks


@dataclass(eq=False, init=False)
class WorkflowAgent(Agent):
    """An agent that runs its sub-agents instead of calling a model. Takes ADK's
    BaseAgent keywords only: name, description, sub_agents and the agent callbacks."""

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        sub_agents: Sequence[Agent] = (),
        before_agent_callback: Callbacks = None,
        after_agent_callback: Callbacks = None,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            sub_agents=list(sub_agents),
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )


@dataclass(eq=False, init=False)
class SequentialAgent(WorkflowAgent):
    """Runs its sub-agents one after the other; each sees what the earlier ones wrote
    (events and state).

    Args:
        name: The agent's name, an identifier.
        description: What the agent does, for other agents' models.
        sub_agents: The agents it runs (LLM agents or workflow agents), in order.
        before_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content that answers in the agent's place.
        after_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content added after the agent's answer.

    Raises:
        ValueError: The name is not an identifier, or a sub-agent has another parent.
    """


@dataclass(eq=False, init=False)
class ParallelAgent(WorkflowAgent):
    """Runs its sub-agents at the same time, each on a branch of its own
    ("parallel.sub"): a branch's model sees the events before the ParallelAgent ran and
    its own, not the other branches'. Their tool calls share the fleet's workers.

    Args:
        name: The agent's name, an identifier.
        description: What the agent does, for other agents' models.
        sub_agents: The agents it runs (LLM agents or workflow agents).
        before_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content that answers in the agent's place.
        after_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content added after the agent's answer.

    Raises:
        ValueError: The name is not an identifier, or a sub-agent has another parent.
    """


@dataclass(eq=False, init=False)
class LoopAgent(WorkflowAgent):
    """Runs its sub-agents in order, again and again: `max_iterations` times, or until
    one of them escalates (the `exit_loop` tool, or `tool_context.actions.escalate`).
    The iteration stops after the sub-agent that escalated. Without `max_iterations` it
    loops until an escalation, as ADK's does.

    Args:
        name: The agent's name, an identifier.
        description: What the agent does, for other agents' models.
        sub_agents: The agents it runs (LLM agents or workflow agents), in order.
        max_iterations: Most passes over the sub-agents; None: until one escalates.
        before_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content that answers in the agent's place.
        after_agent_callback: One callback or a list: `(callback_context)`, returning a
            Content added after the agent's answer.

    Raises:
        ValueError: The name is not an identifier, or a sub-agent has another parent.
        TypeError: `max_iterations` is not an int or None.
    """

    max_iterations: int | None = None

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        sub_agents: Sequence[Agent] = (),
        max_iterations: int | None = None,
        before_agent_callback: Callbacks = None,
        after_agent_callback: Callbacks = None,
    ) -> None:
        if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int)
        ):
            raise TypeError(
                f"agent {name!r}: max_iterations must be an int or None, "
                f"not {type(max_iterations).__name__}"
            )
        self.max_iterations = max_iterations
        super().__init__(
            name,
            description=description,
            sub_agents=sub_agents,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
