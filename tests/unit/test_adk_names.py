"""ADK's names and signatures: toolfleet.adk, LlmAgent, and BaseTool custom tools."""

from __future__ import annotations

import asyncio
import time
from types import ModuleType
from typing import Any

import pytest
from google.genai import types

from tests.support import InProcessRunner
from toolfleet.adk import (
    Agent,
    AgentTool,
    BaseTool,
    BaseToolset,
    FunctionTool,
    LlmAgent,
    LongRunningFunctionTool,
    ReadonlyContext,
    ToolContext,
)
from toolfleet.orchestrator.loop.invocation import Invocation, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, ToolCall
from toolfleet.workers.executor import execute


def get_weather_report(city: str) -> dict[str, str]:
    """Retrieves the current weather report for a specified city.

    Args:
        city: The city.
    """
    return {"status": "success", "report": f"Sunny in {city}"}


def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
    """Asks for approval for the reimbursement.

    Args:
        purpose: Why.
        amount: How much.
    """
    return {"status": "pending", "approver": "Sean Zhou", "purpose": purpose}


class StockPriceTool(BaseTool):
    """A custom tool as ADK's custom-tools guide writes one."""

    def __init__(self) -> None:
        super().__init__(name="get_stock_price", description="Gets a stock's price.")

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"symbol": types.Schema(type=types.Type.STRING, description="Ticker")},
                required=["symbol"],
            ),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        tool_context.state["last_symbol"] = args["symbol"]
        return {"symbol": args["symbol"], "price": 123.5}


class Undeclared(BaseTool):
    """Forgot _get_declaration."""

    def __init__(self) -> None:
        super().__init__(name="undeclared", description="Nothing.")


class StockToolset(BaseToolset):
    """A toolset may return BaseTools too."""

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[Any]:
        return [StockPriceTool()]


def envelope(tool: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(
        call_id="c1", tool=tool, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


def test_adks_constructors_take_adks_keywords() -> None:
    weather = FunctionTool(func=get_weather_report)
    approval = LongRunningFunctionTool(func=ask_for_approval)
    helper = LlmAgent(name="helper", model="gemini-2.0-flash", description="Helps.")
    agent = Agent(
        name="weather_agent",
        model="gemini-2.0-flash",
        instruction="Answer about the weather.",
        tools=[weather, approval, AgentTool(agent=helper, skip_summarization=True)],
    )
    assert isinstance(agent, LlmAgent)
    assert sorted(agent.function_tools) == ["ask_for_approval", "get_weather_report", "helper"]
    assert approval.is_long_running


def test_a_custom_base_tool_is_declared_from_its_declaration() -> None:
    made = function_tool_of(StockPriceTool())
    assert made.name == "get_stock_price"
    assert made.declaration() == {
        "name": "get_stock_price",
        "description": "Gets a stock's price.",
        "parameters_json_schema": {
            "type": "object",
            "properties": {"symbol": {"type": "string", "description": "Ticker"}},
            "required": ["symbol"],
        },
    }
    assert made.is_async  # run_async: an io pool's by default


def function_tool_of(custom: BaseTool) -> FunctionTool:
    return Agent(name="a", tools=[custom]).function_tools[custom.name]


def test_a_custom_tool_runs_as_a_worker_runs_it_with_its_tool_context() -> None:
    made = function_tool_of(StockPriceTool())
    result = execute(
        made, envelope("get_stock_price", {"symbol": "GOOG"}), worker="w", max_result_bytes=10_000
    ).result
    assert result.status is CallStatus.SUCCESS
    assert result.response == {"symbol": "GOOG", "price": 123.5}
    assert result.state_delta == {"last_symbol": "GOOG"}
    missing = execute(made, envelope("get_stock_price", {}), worker="w", max_result_bytes=10_000)
    assert missing.result.response["error_message"] == "symbol: required argument is missing"


def test_a_custom_tool_without_a_declaration_is_refused_naming_it() -> None:
    with pytest.raises(ToolDefinitionError, match="Undeclared has no declaration"):
        Agent(name="a", tools=[Undeclared()])


def test_workers_find_custom_tools_at_module_level_and_in_toolsets() -> None:
    module = ModuleType("custom_tools")
    module.stock = StockPriceTool()  # type: ignore[attr-defined]
    module.toolset = StockToolset(tool_name_prefix="market")  # type: ignore[attr-defined]
    assert sorted(t.name for t in tools_in_module(module)) == [
        "get_stock_price",
        "market_get_stock_price",
    ]


async def test_a_custom_tool_runs_in_the_loop(store: SessionStore) -> None:
    model = ScriptedModel(
        [
            call(Call("get_stock_price", {"symbol": "GOOG"})),
            say(lambda v: f"GOOG is {v.response('get_stock_price')['price']}"),
        ]
    )
    agent = Agent(name="stocks", tools=[StockPriceTool()], model=model)
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        agent, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    message = types.Content(role="user", parts=[types.Part(text="GOOG?")])
    updates: list[Update] = [u async for u in run_invocation(inv, message)]
    final = [u for u in updates if isinstance(u, Event)][-1]
    assert text_of(final.content) == "GOOG is 123.5"
    assert (await store.get(session.key)).state == {"last_symbol": "GOOG"}


def test_toolset_base_tools_keep_their_declaration_under_a_prefix() -> None:
    (offered,) = asyncio.run(StockToolset(tool_name_prefix="market").get_tools_with_prefix(None))
    assert offered.name == "market_get_stock_price"
    assert offered.declaration()["parameters_json_schema"]["required"] == ["symbol"]
