"""A confirmation-gated tool never runs without a person's yes, whatever the model's
turn holds (odd names, smuggled keys, repeated ids, thousands of calls, parallel
branches), and a before_tool callback's changes to the arguments are what runs and what
the confirmation is asked of, as in ADK."""

from __future__ import annotations

import types as pytypes
from typing import Any

import pytest
from google.genai import types

from tests.support import InProcessRunner
from tests.unit.test_confirmation_check import RUNS, pay
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.workflow import ParallelAgent
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation, InvocationEnded, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import Keys
from toolfleet.shared.tools import FunctionTool, ToolDefinitionError, ToolRegistry


def small_ok(amount: int) -> bool:
    return amount > 100


PAY = FunctionTool(pay, require_confirmation=True)
PAY_CHECKED = FunctionTool(pay, name="pay_checked", require_confirmation=small_ok)


class RawModel:
    """A model whose turn is given as a Content, built however the test likes."""

    name = "raw"

    def __init__(self, *turns: types.Content) -> None:
        self.turns = list(turns)
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> types.Content:
        self.requests.append(request)
        if self.turns:
            return self.turns.pop(0)
        return types.Content(role="model", parts=[types.Part(text="done")])


def calls_turn(*calls: types.FunctionCall) -> types.Content:
    return types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])


async def go(
    store: SessionStore, agent: Agent, model: Any, **settings: Any
) -> tuple[list[Update], InProcessRunner, Invocation]:
    RUNS.clear()
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner()
    inv = Invocation(
        agent, lambda _: model, session, store, runner, Settings(**settings), Keys("t")
    )
    content = types.Content(role="user", parts=[types.Part(text="go")])
    updates = [u async for u in run_invocation(inv, content)]
    return updates, runner, inv


def ended(updates: list[Update]) -> EndReason:
    last = updates[-1]
    assert isinstance(last, InvocationEnded)
    return last.reason


def sent(runner: InProcessRunner) -> list[str]:
    return [c for batch in runner.batches for c in batch]


async def test_odd_names_are_unknown_and_nothing_runs(store: SessionStore) -> None:
    names = ["Pay", " pay", "pay ", "pay\n", "PAY", "", "pay\x00", "\uff50ay", "a" * 100_000]
    model = RawModel(calls_turn(*[types.FunctionCall(name=n, args={"amount": 5}) for n in names]))
    agent = Agent(name="tester", tools=[PAY], model=model)
    updates, runner, _ = await go(store, agent, model)
    assert sent(runner) == [] and RUNS == []
    assert ended(updates) is EndReason.ANSWERED


async def test_smuggled_confirmation_args_are_refused(store: SessionStore) -> None:
    yes = {"confirmed": True, "hint": "", "payload": None}
    model = RawModel(
        calls_turn(
            types.FunctionCall(name="pay", args={"amount": 5, "tool_confirmation": yes}),
            types.FunctionCall(name="pay", args={"amount": 5, "tool_context": {"x": 1}}),
            types.FunctionCall(name="pay", args={"amount": 5, "confirmation": yes}),
            types.FunctionCall(name="pay", args={"amount": {"$sealed": "x"}}),
        )
    )
    agent = Agent(name="tester", tools=[PAY], model=model)
    _updates, runner, _ = await go(store, agent, model)
    assert sent(runner) == [] and RUNS == []


async def test_duplicate_ids_with_dedupe_each_wait(store: SessionStore) -> None:
    model = RawModel(
        calls_turn(
            types.FunctionCall(id="x", name="pay", args={"amount": 5}),
            types.FunctionCall(id="x", name="pay", args={"amount": 5}),
            types.FunctionCall(id="x", name="pay_checked", args={"amount": 500}),
            types.FunctionCall(id="x", name="pay_checked", args={"amount": 500}),
            types.FunctionCall(id="x", name="pay_checked", args={"amount": 5}),
        )
    )
    agent = Agent(name="tester", tools=[PAY, PAY_CHECKED], model=model)
    updates, _runner, inv = await go(store, agent, model, dedupe_tool_calls=True)
    assert ended(updates) is EndReason.AWAITING_CONFIRMATION
    assert RUNS == [5]  # the small checked one only
    pending = await store.pending_calls(inv.session.key)
    assert len(pending) == 4 and len({p.call_id for p in pending}) == 4


async def test_parallel_branches_do_not_run_the_gated_tool(store: SessionStore) -> None:
    m1 = ScriptedModel([call(Call("pay", {"amount": 7})), say("a")])
    m2 = ScriptedModel([call(Call("pay", {"amount": 8})), say("b")])
    a = Agent(name="a", tools=[PAY], model=m1)
    b = Agent(name="b", tools=[PAY], model=m2)
    root = ParallelAgent(name="par", sub_agents=[a, b])
    models = {"a": m1, "b": m2}
    RUNS.clear()
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner()
    inv = Invocation(
        root, lambda ag: models[ag.name], session, store, runner, Settings(), Keys("t")
    )
    content = types.Content(role="user", parts=[types.Part(text="go")])
    updates = [u async for u in run_invocation(inv, content)]
    assert sent(runner) == [] and RUNS == []
    assert ended(updates) is EndReason.AWAITING_CONFIRMATION


async def test_thousands_of_gated_calls(store: SessionStore) -> None:
    model = RawModel(
        calls_turn(*[types.FunctionCall(name="pay", args={"amount": i}) for i in range(3000)])
    )
    agent = Agent(name="tester", tools=[PAY], model=model)
    _updates, runner, _inv = await go(store, agent, model)
    assert sent(runner) == [] and RUNS == []


def clamp(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
    """A guard, ADK-style: caps the amount in place and lets the call go on."""
    args["amount"] = min(args["amount"], 100)


def raise_to_500(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
    args["amount"] = 500


def spoil(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
    args["amount"] = "lots"


async def test_a_before_tool_callback_that_changes_the_arguments_runs_the_tool_with_them(
    store: SessionStore,
) -> None:
    model = RawModel(calls_turn(types.FunctionCall(name="pay_any", args={"amount": 5000})))
    agent = Agent(
        name="tester", tools=[FunctionTool(pay, name="pay_any")], model=model,
        before_tool_callback=clamp,
    )  # fmt: skip
    await go(store, agent, model)
    assert RUNS == [100]


@pytest.mark.parametrize(
    ("guard", "asked", "runs"),
    [(clamp, 5000, [100]), (raise_to_500, 5, [])],
    ids=["lowered below the check", "raised above it"],
)
async def test_the_confirmation_is_asked_of_the_arguments_the_tool_runs_with(
    store: SessionStore, guard: Any, asked: int, runs: list[int]
) -> None:
    """The check (a yes above 100) decides on the callback's arguments, and the worker,
    which checks again, gets the same: lowered, the call runs unasked; raised, it waits
    for a person - who is shown, and once they confirm runs, the model's arguments."""
    model = RawModel(calls_turn(types.FunctionCall(name="pay_checked", args={"amount": asked})))
    agent = Agent(name="tester", tools=[PAY_CHECKED], model=model, before_tool_callback=guard)
    updates, runner, inv = await go(store, agent, model)
    pending = await store.pending_calls(inv.session.key)
    assert runs == RUNS and len(sent(runner)) == len(runs) and len(pending) == 1 - len(runs)
    if pending:
        assert pending[0].args == {"amount": asked}
        assert ended(updates) is EndReason.AWAITING_CONFIRMATION


async def test_arguments_a_callback_spoils_are_refused_as_the_models_would_be(
    store: SessionStore,
) -> None:
    model = RawModel(calls_turn(types.FunctionCall(name="pay_any", args={"amount": 5})))
    agent = Agent(
        name="tester", tools=[FunctionTool(pay, name="pay_any")], model=model,
        before_tool_callback=spoil,
    )  # fmt: skip
    _updates, runner, _ = await go(store, agent, model)
    assert RUNS == [] and sent(runner) == []
    (answer,) = [r for r in model.requests[-1].contents[-1].parts or []]
    assert answer.function_response is not None
    assert answer.function_response.response["error_type"] == "InvalidArguments"


def test_one_name_cannot_be_a_tool_gated_for_one_agent_and_not_for_another() -> None:
    """Workers and `toolfleet mcp serve --tools` know a tool by its name: defined twice
    apart, one of the two definitions would serve both agents' calls."""
    module = pytypes.ModuleType("gated_tools")
    module.teller = Agent(name="teller", tools=[PAY])  # type: ignore[attr-defined]
    module.clerk = Agent(name="clerk", tools=[pay])  # type: ignore[attr-defined]
    twice = r"'pay' names .* twice, with different require_confirmation"
    with pytest.raises(ToolDefinitionError, match=twice):
        ToolRegistry(tools_in_module(module))
    module.clerk = Agent(name="clerk", tools=[PAY])  # type: ignore[attr-defined]
    assert ToolRegistry(tools_in_module(module))["pay"] is PAY  # one definition: fine


async def test_arguments_that_are_no_object_are_refused_not_raised(store: SessionStore) -> None:
    """Gemini's SDK checks the arguments are an object; a model's adapter or an
    after_model callback that builds a call itself may not."""
    odd = types.FunctionCall.model_construct(name="pay_any", args=[5000], id=None)
    model = RawModel(calls_turn(odd))
    agent = Agent(name="tester", tools=[FunctionTool(pay, name="pay_any")], model=model)
    updates, runner, _ = await go(store, agent, model)
    assert RUNS == [] and sent(runner) == [] and ended(updates) is EndReason.ANSWERED
    (answer,) = model.requests[-1].contents[-1].parts or []
    assert answer.function_response is not None
    assert answer.function_response.response["error_type"] == "InvalidArguments"
    assert "not a JSON object" in answer.function_response.response["error_message"]
