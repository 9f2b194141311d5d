"""ADK's `BaseAgent` and its callback type aliases, for programs that name them.

ADK's samples import BaseAgent to annotate a plugin's `agent` argument, or to check
`isinstance(agent, BaseAgent)`: both work, since every toolfleet agent (Agent and the
workflow agents) counts as one. A custom agent - a subclass of BaseAgent with its own
`_run_async_impl` - does not port: the orchestrator runs only LLM agents and ADK's
workflow agents, so defining one raises NotPortedError, saying what to use instead.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from google.genai import types

from toolfleet.orchestrator.adk.unsupported import NotPortedError
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.plugins.context import CallbackContext

CUSTOM_AGENTS = (
    "custom agents (a BaseAgent subclass with its own _run_async_impl) are not supported by "
    "toolfleet: use Agent (LlmAgent) with tools and callbacks, or SequentialAgent, "
    "ParallelAgent and LoopAgent for a fixed flow"
)

_SingleAgentCallback: TypeAlias = Callable[
    [CallbackContext], Awaitable[types.Content | None] | types.Content | None
]
BeforeAgentCallback: TypeAlias = _SingleAgentCallback | list[_SingleAgentCallback]
AfterAgentCallback: TypeAlias = _SingleAgentCallback | list[_SingleAgentCallback]


class BaseAgent(ABC):  # noqa: B024 - nothing to implement: it is never subclassed here
    """What every agent is (`isinstance(agent, BaseAgent)`); not a base of one's own."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise NotPortedError(f"class {cls.__name__}(BaseAgent): {CUSTOM_AGENTS}")

    def __new__(cls, *args: Any, **kwargs: Any) -> BaseAgent:
        """Refused: an agent is an Agent (or a workflow agent), never a bare BaseAgent."""
        raise NotPortedError(f"BaseAgent(...): {CUSTOM_AGENTS}")


BaseAgent.register(Agent)  # the workflow agents are Agents too
