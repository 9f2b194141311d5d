"""What a worker cannot import is refused when the tool is defined, saying what to do."""

from __future__ import annotations

import pytest

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool, tool

MOVE_IT = "define it with `def` at the top level of a module"


class Inventory:
    def count(self, item: str) -> int:
        """Counts an item."""
        return len(item)


def test_a_lambda_is_refused_even_with_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match="is a lambda") as err:
        FunctionTool(func=lambda city: city, name="get_weather")
    assert MOVE_IT in str(err.value)
    assert "<locals>.<lambda> is a lambda" in str(err.value)


def test_a_nested_function_is_refused_naming_it() -> None:
    def lookup(city: str) -> str:
        """Looks up."""
        return city

    for make in (FunctionTool, LongRunningFunctionTool, tool):
        with pytest.raises(ToolDefinitionError, match="is a nested function") as err:
            make(lookup)
        assert "test_a_nested_function_is_refused_naming_it.<locals>.lookup" in str(err.value)
        assert MOVE_IT in str(err.value)
    with pytest.raises(ToolDefinitionError, match="nested function"):
        Agent(name="a", tools=[lookup])


def test_a_bound_method_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Inventory\.count is a bound method") as err:
        FunctionTool(Inventory().count)
    assert MOVE_IT in str(err.value)


def test_module_level_functions_and_agent_tools_still_work() -> None:
    from examples.summarizer import root_agent

    assert "summary_agent" in root_agent.function_tools
