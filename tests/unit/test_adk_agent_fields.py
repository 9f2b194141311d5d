"""ADK's LlmAgent fields on toolfleet's Agent: each runs as in ADK or is refused when the
agent is built (scripted model, in-process runner, fakeredis store)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.genai import types
from pydantic import BaseModel

from tests.support import InProcessRunner
from tests.unit.test_loop import add
from toolfleet.adk import (
    BasePlugin,
    BuiltInCodeExecutor,
    CallbackContext,
    LlmAgent,
    LlmRequest,
    LlmResponse,
    PlanReActPlanner,
    google_search,
)
from toolfleet.orchestrator.agents.adk_fields import REFUSED
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.planners import FINAL_ANSWER_TAG, PLANNING_TAG
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation, InvocationEnded, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import Model, text_of
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError, ModelError
from toolfleet.shared.keys import Keys

# google.adk.agents.llm_agent.LlmAgent.model_fields of google-adk 2.13.
ADK_LLM_AGENT_FIELDS = (
    "name",
    "description",
    "rerun_on_resume",
    "wait_for_output",
    "retry_config",
    "timeout",
    "input_schema",
    "output_schema",
    "state_schema",
    "parent_agent",
    "sub_agents",
    "before_agent_callback",
    "after_agent_callback",
    "model",
    "instruction",
    "global_instruction",
    "static_instruction",
    "tools",
    "generate_content_config",
    "mode",
    "parallel_worker",
    "disallow_transfer_to_parent",
    "disallow_transfer_to_peers",
    "include_contents",
    "output_key",
    "planner",
    "code_executor",
    "before_model_callback",
    "after_model_callback",
    "on_model_error_callback",
    "before_tool_callback",
    "after_tool_callback",
    "on_tool_error_callback",
)


async def run(
    store: SessionStore,
    agent: Agent,
    models: dict[str, Model] | None = None,
    text: str = "go",
    session_id: str = "s1",
    plugins: tuple[BasePlugin, ...] = (),
) -> list[Update]:
    session = await store.get_or_create("app", "u1", session_id)

    def model_of(a: Agent) -> Model:
        if models is not None:
            return models[a.name]
        assert isinstance(a.model, ScriptedModel)
        return a.model

    inv = Invocation(agent, model_of, session, store, InProcessRunner(), Settings(), Keys("t"))
    inv.plugins = plugins
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [u async for u in run_invocation(inv, message)]


async def seed(store: SessionStore, **state: Any) -> None:
    """Session s1's state before the run."""
    session = await store.get_or_create("app", "u1", "s1")
    await store.append(session, Event(invocation_id="seed", author="user", state_delta=state))


def events(updates: list[Update]) -> list[Event]:
    return [u for u in updates if isinstance(u, Event)]


def ending(updates: list[Update]) -> EndReason:
    last = updates[-1]
    assert isinstance(last, InvocationEnded)
    return last.reason


def model_text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


# -- every field: taken, or refused with what to use instead --------------------------


def test_every_adk_llm_agent_field_is_a_field_or_refused() -> None:
    own = {f.name for f in dataclasses.fields(Agent) if f.init} | {"model"}
    missing = [f for f in ADK_LLM_AGENT_FIELDS if f not in own and f not in REFUSED]
    assert missing == []


@pytest.mark.parametrize("field", sorted(REFUSED))
def test_a_field_toolfleet_does_not_run_is_refused_naming_it_and_what_to_use(field: str) -> None:
    accepted, instead = REFUSED[field]
    with pytest.raises(ConfigError, match=field) as raised:
        set_: dict[str, Any] = {field: object() if accepted[0] is None else True}
        LlmAgent(name="a", **set_)
    assert instead in str(raised.value)
    for value in accepted:  # ADK's default (or what toolfleet does anyway): taken
        at_default: dict[str, Any] = {field: value}
        LlmAgent(name="a", **at_default)


def test_a_generation_setting_passed_on_its_own_points_at_generate_content_config() -> None:
    with pytest.raises(ConfigError, match=r"temperature, max_output_tokens are Generate") as e:
        Agent(name="a", temperature=0.1, max_output_tokens=10)  # type: ignore[call-arg]
    assert "generate_content_config=types.GenerateContentConfig(" in str(e.value)
    with pytest.raises(ConfigError, match=r"Agent\(instruction=\.\.\.\)"):
        Agent(name="a", system_instruction="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):  # not ADK's either
        Agent(name="a", no_such_field=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (types.GenerateContentConfig(tools=[types.Tool()]), r"Agent\(tools="),
        (types.GenerateContentConfig(system_instruction="x"), r"Agent\(instruction="),
        (types.GenerateContentConfig(response_schema={"type": "OBJECT"}), "output_schema"),
        (
            types.GenerateContentConfig(http_options=types.HttpOptions(base_url="http://x")),
            "base_url",
        ),
        (
            types.GenerateContentConfig(http_options=types.HttpOptions(timeout=5)),
            "TOOLFLEET_MODEL_TIMEOUT_S",
        ),
    ],
)
def test_generate_content_config_may_not_hold_what_the_agent_sets(
    config: types.GenerateContentConfig, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        Agent(name="a", generate_content_config=config)


# -- planner, code_executor (more: test_adk_planners, and on the wire test_gemini_config)


async def test_adks_planner_and_code_executor_run_and_the_offline_model_takes_them(
    store: SessionStore,
) -> None:
    model = ScriptedModel([say(f"{PLANNING_TAG}Add them.{FINAL_ANSWER_TAG}3")])
    agent = Agent(
        name="calc",
        tools=[add, google_search],
        model=model,
        planner=PlanReActPlanner(),
        code_executor=BuiltInCodeExecutor(),
    )

    answer = events(await run(store, agent))[-1]

    assert text_of(answer.content) == "3"
    request = model.requests[0]
    assert [t.name for t in request.tools] == ["add"]  # google_search is Gemini's
    assert request.config is not None and request.config.tools == [
        types.Tool(google_search=types.GoogleSearch()),
        types.Tool(code_execution=types.ToolCodeExecution()),
    ]
    with pytest.raises(ConfigError, match="planner must be a BuiltInPlanner"):
        Agent(name="a", planner=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"code_executor must be BuiltInCodeExecutor\(\)"):
        Agent(name="a", code_executor=object())  # type: ignore[arg-type]


# -- generate_content_config ------------------------------------------------------------


async def test_generate_content_config_goes_with_every_model_call(store: SessionStore) -> None:
    model = ScriptedModel([call(Call("add", {"a": 1, "b": 2})), say("3")])
    config = types.GenerateContentConfig(temperature=0.3, max_output_tokens=64)
    agent = Agent(name="calc", tools=[add], model=model, generate_content_config={"top_k": 5})  # type: ignore[arg-type]
    assert agent.generate_content_config == types.GenerateContentConfig(top_k=5)  # as ADK's
    agent = Agent(name="calc", tools=[add], model=model, generate_content_config=config)

    await run(store, agent)

    assert [r.config for r in model.requests] == [config, config]
    assert all(r.config is not config for r in model.requests)  # copies: callbacks may edit


# -- output_key ---------------------------------------------------------------------------


async def test_output_key_saves_the_final_answer_as_the_final_events_state_delta(
    store: SessionStore,
) -> None:
    model = ScriptedModel([call(Call("add", {"a": 1, "b": 2})), say("It is 3.")])
    agent = Agent(name="calc", tools=[add], model=model, output_key="sum")

    updates = await run(store, agent)

    model_turn, responses, answer = events(updates)[1:]
    assert "sum" not in model_turn.state_delta and "sum" not in responses.state_delta
    assert answer.state_delta == {"sum": "It is 3."}
    stored = await store.get_or_create("app", "u1", "s1")
    assert stored.state["sum"] == "It is 3."
    assert stored.events[-1].state_delta == {"sum": "It is 3."}


class Verdict(BaseModel):
    ok: bool
    note: str | None = None


async def test_output_key_with_output_schema_saves_the_validated_dict(
    store: SessionStore,
) -> None:
    agent = Agent(
        name="judge",
        model=ScriptedModel([say('{"ok": true}')]),
        output_schema=Verdict,
        output_key="verdict",
    )
    updates = await run(store, agent)
    assert events(updates)[-1].state_delta == {"verdict": {"ok": True}}

    wrong = Agent(
        name="judge",
        model=ScriptedModel([say("yes")]),
        output_schema=Verdict,
        output_key="verdict",
    )
    with pytest.raises(ModelError, match=r"output_schema Verdict.*state\['verdict'\]"):
        await run(store, wrong, session_id="s2")
    stored = await store.get_or_create("app", "u1", "s2")
    assert [e.author for e in stored.events] == ["user"] and "verdict" not in stored.state


# -- on_model_error_callback --------------------------------------------------------------


async def test_on_model_error_callback_answers_a_failed_model_call(store: SessionStore) -> None:
    seen: list[tuple[str, str]] = []

    async def fallback(
        callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse:
        seen.append((type(error).__name__, llm_request.agent_name))
        callback_context.state["degraded"] = True
        return LlmResponse(model_text("The model is away; try later."))

    def unchanged(callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        seen.append(("after_model", text_of(llm_response.content)))

    agent = Agent(
        name="desk",
        model=ScriptedModel([]),  # every call fails with ModelError
        output_key="out",
        on_model_error_callback=fallback,
        after_model_callback=unchanged,
    )

    updates = await run(store, agent)

    answer = events(updates)[-1]
    assert text_of(answer.content) == "The model is away; try later."
    assert answer.state_delta == {"degraded": True, "out": "The model is away; try later."}
    # As in ADK, the answer goes through after_model_callback like the model's own.
    assert seen == [("ModelError", "desk"), ("after_model", "The model is away; try later.")]

    class Quiet(BasePlugin):
        async def on_model_error_callback(self, **kwargs: Any) -> None:
            seen.append(("plugin", type(kwargs["error"]).__name__))

    session = await store.get_or_create("app", "u1", "s2")
    inv = Invocation(
        Agent(name="desk", model=ScriptedModel([])),
        lambda a: a.model,  # type: ignore[arg-type, return-value]
        session,
        store,
        InProcessRunner(),
        Settings(),
        Keys("t"),
    )
    inv.plugins = (Quiet("quiet"),)
    message = types.Content(role="user", parts=[types.Part(text="go")])
    with pytest.raises(ModelError, match="offline script"):  # nobody answered: it stands
        [u async for u in run_invocation(inv, message)]
    assert seen[-1] == ("plugin", "ModelError")
