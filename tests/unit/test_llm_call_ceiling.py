"""A run's ceiling on model calls (RunConfig.max_llm_calls) reaches its agent tools'
runs: it travels in each call's envelope, the child counts it from 0, and a child that
passes it ends the calling run, as ADK's nested run raises into its caller."""

from __future__ import annotations

import time
from typing import Any

import pytest
from google.genai import types

from tests.support import InProcessRunner
from toolfleet.adk import LlmCallsLimitExceededError
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.planning import make_envelope
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.llm_calls import LlmCallLimit, ceiling_of, limited
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall

LIMIT_MESSAGE = "Max number of llm calls limit of `2` exceeded"


def nested_agent(request: str) -> str:
    """Stands for an agent tool whose child made more model calls than allowed.

    Args:
        request: What the agent is asked.
    """
    raise LlmCallsLimitExceededError(LIMIT_MESSAGE)


def envelope(**fields: Any) -> dict[str, Any]:
    return {
        "call_id": "c", "tool": "t", "args": {}, "session_id": "s", "app_name": "a",
        "user_id": "u", "invocation_id": "i", "agent": "root", "reply_to": "r",
        "dispatched_at": time.time(), **fields,
    }  # fmt: skip


async def invocation(
    store: SessionStore, model: ScriptedModel, agent: Agent, plugins: tuple[BasePlugin, ...]
) -> Invocation:
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        agent, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    inv.plugins = plugins
    return inv


def test_a_call_carries_the_runs_ceiling_and_an_older_envelope_has_none() -> None:
    old = ToolCall.model_validate(envelope())  # sent before the field existed
    assert old.max_llm_calls is None and ToolContext(old).max_llm_calls is None
    carried = ToolCall.model_validate(envelope(max_llm_calls=2))
    assert ToolContext(carried).max_llm_calls == 2


async def test_the_envelope_takes_the_ceiling_of_the_runs_limit_plugin(
    store: SessionStore,
) -> None:
    agent = Agent(name="root", tools=[nested_agent])
    model = ScriptedModel([say("hi")])
    inv = await invocation(store, model, agent, (BasePlugin("other"), LlmCallLimit(2)))
    assert make_envelope(inv, "c1", "nested_agent", {}).max_llm_calls == 2
    inv.plugins = ()
    assert make_envelope(inv, "c1", "nested_agent", {}).max_llm_calls is None
    assert ceiling_of([LlmCallLimit(0)]) == 0  # no limit, as ADK: handed on as such


def test_a_childs_limit_counts_its_own_calls_from_zero() -> None:
    assert limited(None) == ()
    (child,) = limited(2)
    assert isinstance(child, LlmCallLimit) and (child.limit, child.calls) == (2, 0)


async def test_a_nested_run_past_the_ceiling_raises_in_the_caller_after_its_response_is_stored(
    store: SessionStore,
) -> None:
    agent = Agent(name="root", tools=[nested_agent])
    model = ScriptedModel([call(Call("nested_agent", {"request": "count"})), say("unreached")])
    inv = await invocation(store, model, agent, (LlmCallLimit(2),))
    message = types.Content(role="user", parts=[types.Part(text="go")])
    with pytest.raises(LlmCallsLimitExceededError) as raised:
        _ = [u async for u in run_invocation(inv, message)]
    assert str(raised.value) == LIMIT_MESSAGE
    assert len(model.requests) == 1  # the caller's model is not asked again
    stored = await store.get(inv.session.key)
    assert stored.open_turn() is None  # the call has its response: nothing is left owed
    (response,) = stored.events[-1].get_function_responses()
    assert response.response is not None
    assert response.response["error_type"] == "LlmCallsLimitExceededError"


async def test_an_on_tool_error_callback_that_answers_the_error_keeps_the_run_going(
    store: SessionStore,
) -> None:
    def recover(**_: Any) -> dict[str, Any]:
        return {"result": "counted by hand"}

    agent = Agent(name="root", tools=[nested_agent], on_tool_error_callback=recover)
    model = ScriptedModel([call(Call("nested_agent", {"request": "count"})), say("done")])
    inv = await invocation(store, model, agent, (LlmCallLimit(2),))
    message = types.Content(role="user", parts=[types.Part(text="go")])
    _ = [u async for u in run_invocation(inv, message)]
    assert len(model.requests) == 2


async def test_a_run_without_a_ceiling_gives_its_model_the_error_response(
    store: SessionStore,
) -> None:
    agent = Agent(name="root", tools=[nested_agent])
    model = ScriptedModel([call(Call("nested_agent", {"request": "count"})), say("done")])
    inv = await invocation(store, model, agent, ())
    message = types.Content(role="user", parts=[types.Part(text="go")])
    _ = [u async for u in run_invocation(inv, message)]
    assert len(model.requests) == 2
