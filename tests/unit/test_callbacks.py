"""Tool and model callbacks, plugins, the retry plugin and dedupe, in the loop (scripted
model, in-process runner, fakeredis store)."""

from __future__ import annotations

from typing import Any

from google.genai import types

from tests.support import InProcessRunner, tool_call
from tests.unit.test_loop import add, explode, response_event, responses
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.callbacks import MODEL_HOOKS, TOOL_HOOKS, Hooks
from toolfleet.orchestrator.loop.invocation import Invocation, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.loop.tool_callbacks import ToolCallbacks
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.plugins import (
    BasePlugin,
    CallbackContext,
    LlmRequest,
    LlmResponse,
    ReflectAndRetryToolPlugin,
)
from toolfleet.orchestrator.plugins.retry import HANDLED
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import CallStatus, answered_result
from toolfleet.shared.tools import FunctionTool


async def run(
    store: SessionStore,
    agent: Agent,
    *,
    plugins: tuple[BasePlugin, ...] = (),
    **settings: Any,
) -> tuple[list[Update], InProcessRunner, SessionKey]:
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner()
    model = agent.model
    assert isinstance(model, ScriptedModel)
    inv = Invocation(
        agent, lambda _: model, session, store, runner, Settings(**settings), Keys("t")
    )
    inv.plugins = plugins
    content = types.Content(role="user", parts=[types.Part(text="go")])
    updates = [u async for u in run_invocation(inv, content)]
    return updates, runner, session.key


def agent_with(*steps: Any, **callbacks: Any) -> Agent:
    return Agent(name="tester", tools=[add, explode], model=ScriptedModel(list(steps)), **callbacks)


async def test_before_tool_returning_a_dict_answers_the_call_without_dispatching_it(
    store: SessionStore,
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def guard(tool: FunctionTool, args: dict[str, Any], tool_context: ToolContext) -> Any:
        seen.append((tool.name, args))
        tool_context.state["guarded"] = True
        return {"result": "blocked"} if args["a"] == 13 else None

    agent = agent_with(
        call(Call("add", {"a": 13, "b": 1}), Call("add", {"a": 1, "b": 1})),
        say("ok"),
        before_tool_callback=guard,
    )
    updates, runner, session_id = await run(store, agent)

    blocked, added = responses(updates)
    assert blocked.response == {"result": "blocked"}
    assert added.response == {"result": 2}
    # Only the second call reached the runner.
    assert runner.batches == [[added.id]]
    assert seen == [("add", {"a": 13, "b": 1}), ("add", {"a": 1, "b": 1})]
    assert (await store.get(session_id)).state["guarded"] is True


async def test_after_tool_may_replace_a_response_and_sees_the_tools_state_writes(
    store: SessionStore,
) -> None:
    async def double(
        tool: FunctionTool,
        args: dict[str, Any],
        tool_context: ToolContext,
        tool_response: Any,
    ) -> dict[str, Any]:
        # As in ADK: what add returned (5), not the {"result": 5} the model gets.
        tool_context.state["after"] = tool_response
        return {"doubled": tool_response * 2}

    agent = agent_with(call(Call("add", {"a": 2, "b": 3})), say("ok"), after_tool_callback=double)
    updates, _, _ = await run(store, agent)
    (added,) = responses(updates)
    assert added.response == {"doubled": 10}
    assert response_event(updates).state_delta == {"after": 5}


async def test_after_tool_gets_a_returned_dict_as_it_is_and_its_value_replaces_the_response(
    store: SessionStore,
) -> None:
    """ADK's contract both ways: a tool's dict reaches after_tool unchanged (a dict that
    happens to hold only "result" too), and a value that is not a dict, returned by a
    plugin or a callback, goes to the model as {"result": value}."""
    seen: list[Any] = []

    class Plugin(BasePlugin):
        async def after_tool_callback(self, *, result: Any, **_: Any) -> Any:
            seen.append(("plugin", result))
            return "from the plugin" if result == {"result": 4} else None

    def agent_callback(tool_response: Any, **_: Any) -> Any:
        seen.append(("agent", tool_response))
        return [tool_response, "listed"]

    answer = FunctionTool(returns_a_dict)
    agent = Agent(
        name="tester",
        tools=[add, answer],
        model=ScriptedModel(
            [call(Call("returns_a_dict", {"value": 4}), Call("add", {"a": 1, "b": 1})), say("ok")]
        ),
        after_tool_callback=agent_callback,
    )
    updates, _, _ = await run(store, agent, plugins=(Plugin("plugin"),))
    from_dict, added = responses(updates)
    assert from_dict.response == {"result": "from the plugin"}
    assert added.response == {"result": [2, "listed"]}
    assert seen == [("plugin", {"result": 4}), ("plugin", 2), ("agent", 2)]


def returns_a_dict(value: int) -> dict[str, int]:
    """Return {"result": value}, a dict of the tool's own."""
    return {"result": value}


async def test_on_tool_error_may_replace_an_error_and_a_plugin_goes_before_the_agent(
    store: SessionStore,
) -> None:
    agent_calls: list[str] = []

    class Handler(BasePlugin):
        async def on_tool_error_callback(
            self,
            *,
            tool: FunctionTool,
            tool_args: dict[str, Any],
            tool_context: ToolContext,
            error: Exception,
        ) -> dict[str, Any] | None:
            return {"result": f"handled {error}"}

    agent = agent_with(
        call(Call("explode")),
        say("ok"),
        on_tool_error_callback=lambda **kw: agent_calls.append("called"),
    )
    updates, _, _ = await run(store, agent, plugins=(Handler("handler"),))
    (handled,) = responses(updates)
    assert handled.response == {"result": "handled RuntimeError: boom"}
    assert response_event(updates).calls[0].status is CallStatus.SUCCESS
    assert agent_calls == []  # the plugin answered first


async def test_a_failing_callback_answers_its_call_with_an_error_and_the_turn_goes_on(
    store: SessionStore,
) -> None:
    def broken(**_: Any) -> None:
        raise ValueError("bug in the callback")

    agent = agent_with(
        call(Call("add", {"a": 1, "b": 2})), say("still here"), after_tool_callback=broken
    )
    updates, _, session_id = await run(store, agent)
    (answer,) = responses(updates)
    assert answer.response is not None and answer.response["error_type"] == "CallbackError"
    assert text_of((await store.get(session_id)).events[-1].content) == "still here"


async def test_before_model_may_answer_in_the_models_place(store: SessionStore) -> None:
    def canned(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse:
        callback_context.state["canned"] = llm_request.agent_name
        content = types.Content(role="model", parts=[types.Part(text="from the callback")])
        return LlmResponse(content)

    agent = agent_with(say("from the model"), before_model_callback=canned)
    model = agent.model
    assert isinstance(model, ScriptedModel)
    _, _, session_id = await run(store, agent)
    stored = await store.get(session_id)
    assert text_of(stored.events[-1].content) == "from the callback"
    assert model.requests == []  # the model was never called
    assert stored.state["canned"] == "tester"


async def test_after_model_may_replace_the_models_answer(store: SessionStore) -> None:
    class Shout(BasePlugin):
        async def after_model_callback(
            self, *, callback_context: CallbackContext, llm_response: LlmResponse
        ) -> LlmResponse | None:
            text = text_of(llm_response.content).upper()
            return LlmResponse(types.Content(role="model", parts=[types.Part(text=text)]))

    agent = agent_with(say("quiet"))
    _, _, session_id = await run(store, agent, plugins=(Shout("shout"),))
    assert text_of((await store.get(session_id)).events[-1].content) == "QUIET"


async def test_retry_plugin_lets_the_model_retry_n_times_then_the_error_stands(
    store: SessionStore,
) -> None:
    retry = ReflectAndRetryToolPlugin(max_retries=2)
    agent = agent_with(
        call(Call("explode")), call(Call("explode")), call(Call("explode")), say("gave up")
    )
    updates, _, _ = await run(store, agent, plugins=(retry,))

    first, second, third = (responses(updates, turn)[0].response for turn in range(3))
    assert first is not None and second is not None
    assert (first["response_type"], first["retry_count"]) == (HANDLED, 1)
    assert (second["response_type"], second["retry_count"]) == (HANDLED, 2)
    assert "reflection_guidance" in second and second["error_message"] == "boom"
    assert third == {"status": "error", "error_type": "RuntimeError", "error_message": "boom"}
    assert retry._failures == {}  # dropped when the invocation ended


async def test_dedupe_runs_identical_calls_once_and_each_copy_gets_the_response(
    store: SessionStore,
) -> None:
    same = Call("add", {"a": 1, "b": 2})
    agent = agent_with(call(same, Call("add", {"a": 5, "b": 5}), same, same), say("ok"))
    updates, runner, _ = await run(store, agent, dedupe_tool_calls=True)

    answers = responses(updates)
    three, ten = {"result": 3}, {"result": 10}
    assert [a.response for a in answers] == [three, ten, three, three]
    assert len({a.id for a in answers}) == 4  # one response per call id
    (batch,) = runner.batches
    assert batch == [answers[0].id, answers[1].id]


async def test_without_dedupe_identical_calls_all_run(store: SessionStore) -> None:
    same = Call("add", {"a": 1, "b": 2})
    agent = agent_with(call(same, same), say("ok"))
    _, runner, _ = await run(store, agent)
    assert [len(b) for b in runner.batches] == [2]


async def test_without_tool_callbacks_or_plugins_a_result_passes_through_untouched() -> None:
    """No callback can answer: nothing is built for them, and the worker's result is the
    model's as it came (one with a callback is rebuilt, see the tests above)."""
    plain = agent_with(say("-"))
    assert not Hooks(plain).any_of(TOOL_HOOKS) and not Hooks(plain).any_of(MODEL_HOOKS)
    callbacks = ToolCallbacks(Hooks(plain))
    envelope = tool_call("c1", "add", "s1", "t:results:s1", {"a": 1, "b": 2})
    assert await callbacks.before(FunctionTool(add), envelope, {"a": 1, "b": 2}) is None
    result = answered_result(envelope, CallStatus.SUCCESS, {"sum": 3}, worker="w1")
    assert await callbacks.finish(result) is result
    # Any plugin, or one callback of the kind, turns the chain on.
    assert Hooks(plain, (BasePlugin(name="p"),)).any_of(TOOL_HOOKS)
    guarded = agent_with(say("-"), after_tool_callback=lambda **_: None)
    assert Hooks(guarded).any_of(TOOL_HOOKS) and not Hooks(guarded).any_of(MODEL_HOOKS)
    assert Hooks(agent_with(say("-"), before_model_callback=lambda **_: None)).any_of(MODEL_HOOKS)
