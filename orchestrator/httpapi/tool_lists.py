"""Every tool of each served agent, listed once when the HTTP API starts (for /apps,
/health, /metrics and the pools shown in event streams)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)


class ToolLists:
    """The tools of each agent by name; empty until `await listed(...)`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._tools: dict[str, tuple[FunctionTool, ...]] = {}

    async def list_all(self, agents: Mapping[str, Agent]) -> None:
        """List every agent's tools. In a thread: a toolset (OpenAPI, MCP) lists its tools
        on an event loop of its own, and an MCP server's listing may take a while; the
        loop serving requests never waits on it."""
        self._tools = await asyncio.to_thread(lambda: {n: _listed(a) for n, a in agents.items()})

    def of(self, agent_name: str) -> tuple[FunctionTool, ...]:
        """The agent's tools (none for an agent not served)."""
        return self._tools.get(agent_name, ())

    def long_running(self, agent_name: str) -> set[str]:
        """The names of the agent's long-running tools."""
        return {t.name for t in self.of(agent_name) if t.is_long_running}

    def pools_of(self, agent_name: str) -> dict[str, str]:
        """Each of the agent's tools by name, to the pool that runs it."""
        return {t.name: tool_pool(t, self._settings) for t in self.of(agent_name)}

    def needed_pools(self) -> set[str]:
        """The pools that run a tool of some served agent."""
        return {tool_pool(t, self._settings) for tools in self._tools.values() for t in tools}


def _listed(agent: Agent) -> tuple[FunctionTool, ...]:
    """The agent's tools; a toolset that cannot list its tools now is logged and left out
    of these lists (the HTTP API still serves the agent)."""
    tools: list[FunctionTool] = []
    try:
        for tool in agent.all_tools():
            tools.append(tool)
    except ToolDefinitionError as exc:
        log.warning("agent %s: some tools are not listed: %s", agent.name, exc)
    return tuple(tools)
