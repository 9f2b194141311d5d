"""Toolsets as ADK writes them: no super().__init__(), ADK's prefix, and broken ones."""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType
from typing import Any

import pytest

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.transfer import offered_tools
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

CONTEXT = ReadonlyContext.of(
    {}, agent_name="a", invocation_id="i", session_id="s", user_id="u", app_name="app"
)


def add_numbers(a: int, b: int) -> dict[str, Any]:
    """Adds two integer numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return {"status": "success", "result": a + b}


def subtract_numbers(a: int, b: int) -> dict[str, Any]:
    """Subtracts the second number from the first.

    Args:
        a: The first number.
        b: The second number.
    """
    return {"status": "success", "result": a - b}


def greet_user(name: str = "User") -> dict[str, str]:
    """Greets the user."""
    return {"greeting": f"Hello, {name}!"}


class SimpleMathToolset(BaseToolset):
    """As the ADK reference writes it: __init__ does not call super().__init__()."""

    def __init__(self, prefix: str = "math_") -> None:
        self.prefix = prefix
        self._add_tool = FunctionTool(func=add_numbers, name=f"{self.prefix}add_numbers")
        self._subtract_tool = FunctionTool(
            func=subtract_numbers, name=f"{self.prefix}subtract_numbers"
        )

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        return [self._add_tool, self._subtract_tool]


class PrefixedMath(BaseToolset):
    """ADK's own prefix: tool_name_prefix="calculator" gives calculator_add_numbers."""

    def __init__(self) -> None:
        super().__init__(tool_name_prefix="calculator")

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        return [FunctionTool(add_numbers), FunctionTool(subtract_numbers)]


class BrokenToolset(BaseToolset):
    """Fails to list its tools (a missing connection, a bug)."""

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        raise RuntimeError("the MCP server is not reachable")


def test_a_toolset_that_skips_super_init_works_as_in_the_adk_reference() -> None:
    toolset = SimpleMathToolset(prefix="calculator_")
    agent = Agent(name="calculator_agent", tools=[FunctionTool(func=greet_user), toolset])
    offered = asyncio.run(agent.tools_for(lambda: CONTEXT))
    assert sorted(offered) == [
        "calculator_add_numbers",
        "calculator_subtract_numbers",
        "greet_user",
    ]
    assert {t.name for t in agent.all_tools()} == set(offered)


async def test_tool_name_prefix_joins_with_an_underscore_as_in_adk() -> None:
    toolset = PrefixedMath()
    offered = await toolset.get_tools_with_prefix(CONTEXT)
    assert [t.name for t in offered] == ["calculator_add_numbers", "calculator_subtract_numbers"]
    assert offered[0].func is add_numbers  # the same worker function, under its new name
    assert offered[0].declaration()["name"] == "calculator_add_numbers"


async def test_tool_filter_keeps_the_named_tools_before_the_prefix_as_in_adk() -> None:
    toolset = PrefixedMath()
    toolset.tool_filter = ["add_numbers"]
    assert [t.name for t in await toolset.get_tools_with_prefix(CONTEXT)] == [
        "calculator_add_numbers"
    ]


async def test_a_broken_toolset_fails_an_invocation_naming_it() -> None:
    agent = Agent(name="a", tools=[greet_user, BrokenToolset()])
    with pytest.raises(ToolDefinitionError) as err:
        await agent.tools_for(lambda: CONTEXT)
    message = str(err.value)
    assert "BrokenToolset (tests.unit.test_toolsets)" in message
    assert "RuntimeError: the MCP server is not reachable" in message


def test_a_broken_toolset_hides_no_other_tool_of_its_agent_or_module(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(name="a", tools=[greet_user, BrokenToolset(), PrefixedMath()])
    listed: list[str] = []
    with pytest.raises(ToolDefinitionError, match="BrokenToolset"):
        listed.extend(t.name for t in agent.all_tools())
    assert sorted(listed) == ["calculator_add_numbers", "calculator_subtract_numbers", "greet_user"]

    module = ModuleType("tool_module")
    module.agent = agent  # type: ignore[attr-defined]
    module.broken = BrokenToolset()  # type: ignore[attr-defined]
    module.standalone = FunctionTool(add_numbers)  # type: ignore[attr-defined]
    with caplog.at_level(logging.ERROR, "toolfleet.shared.discovery"):
        found = {t.name for t in tools_in_module(module)}
    assert found == {
        "greet_user",
        "calculator_add_numbers",
        "calculator_subtract_numbers",
        "add_numbers",
    }
    errors = [r.getMessage() for r in caplog.records]
    assert any("tool_module: broken (BrokenToolset) cannot list its tools" in e for e in errors)
    assert any("tool_module: agent (Agent)" in e for e in errors)


class SeenContext(BaseToolset):
    """Records the context each listing is given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ReadonlyContext | None] = []

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        self.seen.append(readonly_context)
        return [FunctionTool(greet_user)]


async def test_the_offered_tools_build_a_context_only_for_a_toolset() -> None:
    def no_context() -> ReadonlyContext:
        raise AssertionError("an agent without toolsets needs no context")

    plain = Agent(name="plain", tools=[add_numbers])
    assert list(await offered_tools(plain, no_context)) == ["add_numbers"]
    toolset = SeenContext()
    with_toolset = Agent(name="with_toolset", tools=[add_numbers, toolset])
    offered = await offered_tools(with_toolset, lambda: CONTEXT)
    assert list(offered) == ["add_numbers", "greet_user"]
    assert toolset.seen == [CONTEXT]
