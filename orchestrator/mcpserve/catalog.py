"""Which fleet tools `toolfleet mcp serve` offers: an agent's, or a module's."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.shared.confirmation import SERVED_USER
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.tools import ToolRegistry
from toolfleet.shared.toolsets import ReadonlyContext

# The ids an MCP client's calls run under (it has no toolfleet session).
MCP_SESSION = "mcp"
# An agent's callbacks around its tools' calls, which only its turns run.
TOOL_CALLBACKS = ("before_tool_callback", "after_tool_callback", "on_tool_error_callback")


@dataclass(frozen=True)
class Catalog:
    """The tools to serve: an agent's (its toolsets listed again on each request, through
    their own caches) or a fixed set found in modules."""

    agent: Agent | None = None
    fixed: ToolRegistry | None = None
    app_name: str = "mcp"
    user_id: str = SERVED_USER

    @classmethod
    def of_agent(cls, agent: Agent, app_name: str) -> Catalog:
        """The agent's tools; ConfigError when the agent guards them with tool callbacks,
        which only its turns run: served alone, its tools would run unguarded."""
        guards = [name for name in TOOL_CALLBACKS if getattr(agent, name)]
        if guards:
            raise ConfigError(
                f"agent {agent.name!r} has {', '.join(guards)}: `toolfleet mcp serve` runs "
                "its tools without an agent's turn, so the callbacks would not run and "
                "whatever they guard would be skipped; serve the tools with --tools "
                "<module> once they need no guard, or move the check into the tools "
                "(require_confirmation, or a check inside the function)"
            )
        return cls(agent=agent, app_name=app_name)

    @classmethod
    def of_modules(cls, names: list[str], app_name: str) -> Catalog:
        """Every tool in the modules (as a worker finds them); ConfigError naming a module
        that does not import. Call it before any event loop runs (toolsets list there)."""
        registry = ToolRegistry(tool for name in names for tool in tools_in_module(_import(name)))
        return cls(fixed=registry, app_name=app_name)

    async def tools(self) -> ToolRegistry:
        """The tools on offer now."""
        if self.agent is None:
            return self.fixed or ToolRegistry()
        agent = self.agent

        def context() -> ReadonlyContext:
            return ReadonlyContext.of(
                {},
                agent_name=agent.name,
                invocation_id=MCP_SESSION,
                session_id=MCP_SESSION,
                user_id=self.user_id,
                app_name=self.app_name,
            )

        return await agent.tools_for(context)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"--tools {name!r} cannot be imported: {exc}") from exc
