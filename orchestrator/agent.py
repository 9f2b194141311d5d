"""Agent: a name, an instruction, tools, and the model that drives them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.model import Model
from orchestrator.offline import Script
from shared.tools import FunctionTool, ToolRegistry, as_tool


@dataclass(eq=False)
class Agent:
    """An LLM agent whose tools run on the fleet.

    `model=None` picks Gemini when an API key is set and otherwise the offline model
    playing `offline_script` (see orchestrator.models.choose_model).
    """

    name: str
    instruction: str = ""
    description: str = ""
    tools: Sequence[FunctionTool | Callable[..., Any]] = ()
    model: Model | None = None
    offline_script: Script | None = None
    function_tools: ToolRegistry = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"agent name {self.name!r} must be an identifier")
        self.function_tools = ToolRegistry(as_tool(t) for t in self.tools)

    async def close(self) -> None:
        """Release what the agent's tools hold (toolsets); called at orchestrator shutdown."""

    def all_tools(self) -> Iterable[FunctionTool]:
        """Every tool a worker must know to serve this agent (ToolSource)."""
        return self.function_tools.values()
