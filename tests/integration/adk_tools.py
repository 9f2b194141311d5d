"""ADK-style definitions served by the test fleet's workers: model id strings, the
reference's toolset (no super().__init__()), ADK's prefix, a BaseTool custom tool,
automatic transfer, and a broken toolset that must not stop the workers."""

from __future__ import annotations

from typing import Any

from google.genai import types

from tests.rule_llm import RuleLlm
from toolfleet.adk import (
    Agent,
    AgentTool,
    App,
    BasePlugin,
    BaseTool,
    BaseToolset,
    CallbackContext,
    FunctionTool,
    LlmAgent,
    LlmRequest,
    LlmResponse,
    ReadonlyContext,
    ToolContext,
    get_user_choice,
    load_memory,
)
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, call, say

MODEL_ID = "gemini-2.0-flash"


def adk_add_numbers(a: int, b: int, tool_context: ToolContext) -> dict[str, Any]:
    """Adds two integer numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    tool_context.state["last_math_operation"] = "addition"
    return {"status": "success", "result": a + b}


def adk_subtract_numbers(a: int, b: int) -> dict[str, Any]:
    """Subtracts the second number from the first.

    Args:
        a: The first number.
        b: The second number.
    """
    return {"status": "success", "result": a - b}


def adk_count_words(text: str) -> dict[str, int]:
    """Counts the words of a text.

    Args:
        text: The text.
    """
    return {"words": len(text.split())}


class SimpleMathToolset(BaseToolset):
    """As the ADK reference writes it: __init__ does not call super().__init__()."""

    def __init__(self, prefix: str = "math_") -> None:
        self.prefix = prefix
        self._add_tool = FunctionTool(func=adk_add_numbers, name=f"{self.prefix}add_numbers")
        self._subtract_tool = FunctionTool(
            func=adk_subtract_numbers, name=f"{self.prefix}subtract_numbers"
        )

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        return [self._add_tool, self._subtract_tool]


class WordsToolset(BaseToolset):
    """ADK's own prefix: tool_name_prefix="adk" offers adk_adk_count_words."""

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        return [FunctionTool(func=adk_count_words)]


class BrokenToolset(BaseToolset):
    """Cannot list its tools: the workers log it and serve the rest of this module."""

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        raise RuntimeError("adk_tools.BrokenToolset is broken on purpose")


class AdkStockPriceTool(BaseTool):
    """A custom tool as ADK's guide writes one."""

    def __init__(self) -> None:
        super().__init__(name="adk_stock_price", description="Gets a stock's price.")

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"symbol": types.Schema(type=types.Type.STRING)},
                required=["symbol"],
            ),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return {"symbol": args["symbol"], "price": 42.0, "call": tool_context.function_call_id}


broken_toolset = BrokenToolset()

# The reference's toolset and ADK's prefix, and a custom tool, in one turn.
calculator_agent = LlmAgent(
    name="adk_calculator",
    model=MODEL_ID,
    instruction="Use the calculator tools.",
    tools=[
        SimpleMathToolset(prefix="adkcalc_"),
        WordsToolset(tool_name_prefix="adk"),
        AdkStockPriceTool(),
    ],
    offline_script=[
        call(
            Call("adkcalc_add_numbers", {"a": 5, "b": 3}),
            Call("adk_adk_count_words", {"text": "one two three"}),
            Call("adk_stock_price", {"symbol": "GOOG"}),
        ),
        say("done"),
    ],
)


def _words(view: ScriptView) -> str:
    return f"{view.response('adk_count_words')['words']} words"


# A model id string on both sides of an AgentTool: the child runs on the agents pool.
word_counter = Agent(
    name="adk_word_counter",
    model=MODEL_ID,
    description="Counts the words of a request.",
    tools=[adk_count_words],
    offline_script=[
        lambda view: Step(calls=[Call("adk_count_words", {"text": view.user_text})]),
        say(_words),
    ],
)
counting_agent = Agent(
    name="adk_counting",
    model=MODEL_ID,
    tools=[AgentTool(agent=word_counter, skip_summarization=False)],
    offline_script=[
        lambda view: Step(calls=[Call("adk_word_counter", {"request": view.user_text})]),
        say(lambda view: f"The helper says: {view.response('adk_word_counter')['result']}"),
    ],
)

# Automatic transfer: the desk hands over on its own, in a turn with a worker call.
adk_support = Agent(
    name="adk_support",
    model=MODEL_ID,
    description="Handles urgent problems.",
    tools=[adk_count_words],
    offline_script=[
        lambda view: Step(calls=[Call("adk_count_words", {"text": "support is here now"})]),
        say(lambda view: f"Support here ({_words(view)})."),
    ],
)
adk_desk = Agent(
    name="adk_desk",
    model=MODEL_ID,
    instruction="You are the front desk.",
    tools=[adk_subtract_numbers],
    sub_agents=[adk_support],
    offline_script=[
        call(
            Call("adk_subtract_numbers", {"a": 10, "b": 4}),
            Call("transfer_to_agent", {"agent_name": "adk_support"}),
        )
    ],
)

# A user's own BaseLlm as an AgentTool's model: the worker that runs the child runs it.
llm_word_counter = Agent(
    name="adk_llm_counter",
    description="Counts the words of a request with a model of its own.",
    model=RuleLlm(model="rule-counter", tool="adk_count_words", arg="text"),
    tools=[adk_count_words],
)
llm_counting_agent = Agent(
    name="adk_llm_counting",
    model=MODEL_ID,
    tools=[AgentTool(agent=llm_word_counter)],
    offline_script=[
        lambda view: Step(calls=[Call("adk_llm_counter", {"request": view.user_text})]),
        say(lambda view: f"The helper says: {view.response('adk_llm_counter')['result']}"),
    ],
)

# ADK's built-in tools that run on the fleet: the user's memory, and a choice to make.
adk_choice_desk = Agent(
    name="adk_choice_desk",
    model=MODEL_ID,
    instruction="Help the user choose.",
    tools=[load_memory, get_user_choice],
)

# An AgentTool's child that asks its model three times (two calls, then its answer):
# under RunConfig(max_llm_calls=2) its third model call is one too many.
limited_counter = Agent(
    name="adk_limited_counter",
    model=MODEL_ID,
    description="Counts the words of a request, twice.",
    tools=[adk_count_words],
    offline_script=[
        call(Call("adk_count_words", {"text": "one two"})),
        call(Call("adk_count_words", {"text": "one two three"})),
        say("counted"),
    ],
)
limited_counter_tool = AgentTool(agent=limited_counter)


# An app's plugin that answers its agent tools' agents' model calls itself: the agent
# tool whose run includes the app's plugins (ADK's default) answers with the plugin's
# text, the one that leaves them out with its agent's own model's.
class ChildAnswers(BasePlugin):
    """Answers the model calls of the agents run as agent tools, before their model."""

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        if callback_context.agent_name not in ("adk_plugged_child", "adk_unplugged_child"):
            return None
        answer = types.Content(role="model", parts=[types.Part(text="from the app's plugin")])
        return LlmResponse(content=answer)


def _plugged_child(name: str) -> Agent:
    return Agent(
        name=name,
        model=MODEL_ID,
        description="Answers a request.",
        offline_script=[say("from the child's model")],
    )


def _plugged_parent(name: str, child: Agent, include_plugins: bool) -> Agent:
    return Agent(
        name=name,
        model=MODEL_ID,
        tools=[AgentTool(agent=child, include_plugins=include_plugins)],
        offline_script=[
            call(Call(child.name, {"request": "hi"})),
            say(lambda view: f"child: {view.response(child.name)['result']}"),
        ],
    )


# Agents at the top of the module: the workers find their agent tools there.
plugged_parent = _plugged_parent("adk_plugged_parent", _plugged_child("adk_plugged_child"), True)
unplugged_parent = _plugged_parent(
    "adk_unplugged_parent", _plugged_child("adk_unplugged_child"), False
)
plugged_app = App(
    name="adk_plugged_app", root_agent=plugged_parent, plugins=[ChildAnswers(name="child_answers")]
)
unplugged_app = App(
    name="adk_unplugged_app",
    root_agent=unplugged_parent,
    plugins=[ChildAnswers(name="child_answers")],
)
