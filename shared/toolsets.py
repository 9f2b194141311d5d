"""Toolsets: groups of tools chosen per invocation, as in ADK's BaseToolset."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool, as_tool


@dataclass(frozen=True)
class ReadonlyContext:
    """What a toolset may look at when choosing tools for an invocation.

    Attributes:
        agent_name: The agent whose tools are chosen.
        invocation_id: The invocation (one user message's run).
        session_id: The session's id, within its app and user.
        user_id: The session's user.
        app_name: The session's app.
        state: The session's state, read-only.
    """

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

    With `tool_name_prefix`, every tool is offered as "<prefix>_<name>" (as in ADK:
    "calculator" gives "calculator_add_numbers"). Workers must know every tool a
    toolset can ever return: `all_tools()` asks `get_tools` with no context; override
    it if that does not list them all.

    Args:
        tool_filter: Only these tool names (before the prefix) are offered; None: all.
        tool_name_prefix: Offer each tool as "<prefix>_<name>"; None: under its own name.
    """

    # Class-level defaults: ADK's examples subclass without calling super().__init__().
    tool_name_prefix: str | None = None
    tool_filter: list[str] | None = None

    def __init__(
        self, *, tool_filter: list[str] | None = None, tool_name_prefix: str | None = None
    ) -> None:
        self.tool_filter = tool_filter
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
        """`get_tools` (only the names in `tool_filter`, when set), each tool renamed
        "<prefix>_<name>" when `tool_name_prefix` is set; what agents offer.

        Raises ToolDefinitionError naming the toolset when `get_tools` fails or returns
        something that is not a tool.
        """
        with self._named_problems():
            listed = await self.get_tools(readonly_context)
        return self.offered(listed)

    @contextmanager
    def _named_problems(self) -> Iterator[None]:
        """Any failure inside, as a ToolDefinitionError whose problems name this toolset."""
        try:
            yield
        except ToolDefinitionError as exc:
            problems = [f"toolset {describe(self)}: {p}" for p in exc.problems]
            raise ToolDefinitionError(problems) from exc
        except Exception as exc:
            raise ToolDefinitionError(
                [f"toolset {describe(self)}: get_tools() failed: {type(exc).__name__}: {exc}"]
            ) from exc

    def offered(self, listed: Iterable[Any]) -> list[FunctionTool]:
        """What `get_tools` listed, as agents offer it: only the names in `tool_filter`,
        each renamed "<prefix>_<name>" when `tool_name_prefix` is set. ToolDefinitionError
        naming the toolset when something listed is not a tool."""
        with self._named_problems():
            tools = [as_tool(t) for t in listed]
        if self.tool_filter is not None:
            tools = [t for t in tools if t.name in self.tool_filter]
        prefix = self.tool_name_prefix
        return [t.renamed(f"{prefix}_{t.name}") for t in tools] if prefix else tools

    def all_tools(self) -> Iterable[FunctionTool]:
        """Every tool the toolset can return (for workers, which register them all).

        Runs `get_tools` on an event loop of its own, so not on a thread that runs one
        (call it in a thread there); a toolset whose tools are known without I/O
        overrides it to answer anywhere."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.get_tools_with_prefix(None))
        raise ToolDefinitionError(
            [f"{type(self).__name__}.all_tools() cannot run inside an event loop: override it"]
        )


def describe(toolset: BaseToolset) -> str:
    """The toolset's class, where it is defined, for error messages."""
    cls = type(toolset)
    return f"{cls.__qualname__} ({cls.__module__})"
