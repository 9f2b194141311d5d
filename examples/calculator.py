"""A toolset whose tools get a name prefix (ADK "Toolsets": SimpleMathToolset).

Run: toolfleet run --agent examples.calculator:agent "Add 5 and 3, subtract 2 from 10"
"""

from __future__ import annotations

import logging
import re
from typing import Any

from toolfleet import (
    Agent,
    BaseToolset,
    Call,
    FunctionTool,
    ReadonlyContext,
    ScriptView,
    Step,
    ToolContext,
    say,
)

log = logging.getLogger(__name__)


def add_numbers(a: int, b: int, tool_context: ToolContext) -> dict[str, Any]:
    """Adds two integer numbers.

    Args:
        a: The first number.
        b: The second number.

    Returns:
        A dictionary with the sum, e.g., {'status': 'success', 'result': 5}
    """
    tool_context.state["last_math_operation"] = "addition"
    return {"status": "success", "result": a + b}


def subtract_numbers(a: int, b: int) -> dict[str, Any]:
    """Subtracts the second number from the first.

    Args:
        a: The first number.
        b: The second number.

    Returns:
        A dictionary with the difference, e.g., {'status': 'success', 'result': 1}
    """
    return {"status": "success", "result": a - b}


class SimpleMathToolset(BaseToolset):
    def __init__(self, prefix: str = "math_") -> None:
        super().__init__()
        self.prefix = prefix
        self.closed = 0  # how many times close() ran (tests check it runs once)
        self._add_tool = FunctionTool(add_numbers, name=f"{prefix}add_numbers")
        self._subtract_tool = FunctionTool(subtract_numbers, name=f"{prefix}subtract_numbers")

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        # Could choose by readonly_context.state, e.g. advanced tools for some users.
        return [self._add_tool, self._subtract_tool]

    async def close(self) -> None:
        self.closed += 1
        log.info("SimpleMathToolset(prefix=%r) closed", self.prefix)


def greet_user(name: str = "User") -> dict[str, str]:
    """Greets the user.

    Args:
        name: Whom to greet.
    """
    return {"greeting": f"Hello, {name}!"}


math_toolset_instance = SimpleMathToolset(prefix="calculator_")

_NUMBERS = re.compile(r"-?\d+")


def _compute(view: ScriptView) -> Step:
    a, b, c, d = ([int(n) for n in _NUMBERS.findall(view.user_text)] + [5, 3, 2, 10])[:4]
    return Step(
        calls=[
            Call("calculator_add_numbers", {"a": a, "b": b}),
            Call("calculator_subtract_numbers", {"a": d, "b": c}),
        ]
    )


def _answer(view: ScriptView) -> str:
    total = view.response("calculator_add_numbers")["result"]
    difference = view.response("calculator_subtract_numbers")["result"]
    return f"The sum is {total} and the difference is {difference}."


agent = Agent(
    name="calculator_agent",
    instruction=(
        "You are a helpful calculator and greeter. Use 'greet_user' for greetings. Use "
        "'calculator_add_numbers' to add and 'calculator_subtract_numbers' to subtract. "
        "Announce the state of 'last_math_operation' if it's set: {last_math_operation?}"
    ),
    description="Adds, subtracts and greets.",
    tools=[greet_user, math_toolset_instance],
    offline_script=[_compute, say(_answer)],
)
