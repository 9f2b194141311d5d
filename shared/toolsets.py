"""Toolsets: groups of tools chosen per invocation, as in ADK's BaseToolset."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool


@dataclass(frozen=True)
class ReadonlyContext:
    """What a toolset may look at when choosing tools for an invocation."""

    agent_name: str
    invocation_id: str
    session_id: str
    user_id: str
    app_name: str
    state: Mapping[str, Any]

    @classmethod
    def of(cls, state: Mapping[str, Any], **fields: str) -> ReadonlyContext:
        """A context whose `state` is a read-only copy of `state`, unaffected by later writes."""
        return cls(state=MappingProxyType(dict(state)), **fields)


class BaseToolset:
    """Subclass and implement `get_tools`; `close` releases what the toolset holds.

    `tool_name_prefix` is added to every tool's name (e.g. "calculator_"). Workers
    must know every tool a toolset can ever return: `all_tools()` asks `get_tools`
    with no context; override it if that does not list them all.
    """

    def __init__(self, *, tool_name_prefix: str | None = None) -> None:
        self.tool_name_prefix = tool_name_prefix

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        """The tools to offer in this invocation, named without the prefix; subclasses implement it.

        With None (no invocation), return every tool the toolset can ever offer.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_tools()")

    async def close(self) -> None:
        """Called once when the orchestrator shuts down."""

    async def get_tools_with_prefix(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        """`get_tools`, each tool renamed with `tool_name_prefix` when set; what agents offer."""
        tools = await self.get_tools(readonly_context)
        prefix = self.tool_name_prefix
        return [t.renamed(f"{prefix}{t.name}") for t in tools] if prefix else tools

    def all_tools(self) -> Iterable[FunctionTool]:
        """Every tool the toolset can return (for workers, which register them all)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.get_tools_with_prefix(None))
        raise ToolDefinitionError(
            [f"{type(self).__name__}.all_tools() cannot run inside an event loop: override it"]
        )
