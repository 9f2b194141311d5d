"""An agent's generate_content_config on the wire: the real google-genai client against
the local Gemini stand-in, driven by the loop."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types
from pydantic import BaseModel

from tests.gemini_stand_in import FakeGemini, serve_gemini
from tests.support import InProcessRunner
from tests.unit.test_gemini_model import _b64, _text_reply, _user, get_weather, stand_in_model
from toolfleet.adk import (
    BuiltInCodeExecutor,
    BuiltInPlanner,
    PlanReActPlanner,
    google_search,
    url_context,
)
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.planners import (
    FINAL_ANSWER_TAG,
    PLAN_RE_ACT_INSTRUCTION,
    PLANNING_TAG,
)
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.plugins import CallbackContext, LlmRequest
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with serve_gemini() as fake:
        yield fake


async def _run(store: SessionStore, agent: Agent, model: object) -> Session:
    session = await store.create("app", "u1")
    inv = Invocation(
        agent,
        lambda _: model,  # type: ignore[arg-type, return-value]
        session,
        store,
        InProcessRunner(),
        Settings(),
        Keys("t"),
    )
    [u async for u in run_invocation(inv, _user("Weather in Paris?"))]
    return session


def _config() -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        temperature=0.2,
        max_output_tokens=256,
        response_mime_type="text/plain",
        http_options=types.HttpOptions(headers={"x-team": "infra"}),
        safety_settings=[
            types.SafetySetting(
                category=types.HarmCategory.HARM_CATEGORY_HATE_SPEECH,
                threshold=types.HarmBlockThreshold.BLOCK_LOW_AND_ABOVE,
            )
        ],
    )


async def test_generate_content_config_reaches_gemini_with_the_agents_tools_and_instruction(
    gemini: FakeGemini, store: SessionStore
) -> None:
    gemini.reply(_text_reply("Sunny."))
    model = stand_in_model(gemini)
    agent = Agent(
        name="weather",
        instruction="Be brief.",
        tools=[get_weather],
        model=model,
        generate_content_config=_config(),
    )

    await _run(store, agent, model)

    body = gemini.requests[0].body
    generation = body["generationConfig"]
    assert generation["temperature"] == 0.2
    assert generation["maxOutputTokens"] == 256
    assert generation["responseMimeType"] == "text/plain"
    assert body["safetySettings"] == [
        {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_LOW_AND_ABOVE"}
    ]
    # Merged with what toolfleet sets, as ADK merges it.
    assert body["systemInstruction"]["parts"][0]["text"].startswith("Be brief.")
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    headers = {k.lower(): v for k, v in gemini.requests[0].headers.items()}
    assert headers["x-team"] == "infra" and headers["x-goog-api-key"] == "test-key"
    # The agent's own config is not changed by a call.
    assert agent.generate_content_config is not None
    assert agent.generate_content_config.tools is None
    assert agent.generate_content_config.system_instruction is None


async def test_a_before_model_callback_may_change_the_config_of_one_call(
    gemini: FakeGemini, store: SessionStore
) -> None:
    def colder(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        assert llm_request.config is not None
        llm_request.config.temperature = 0.0

    gemini.reply(_text_reply("Sunny."))
    model = stand_in_model(gemini)
    config = _config()
    agent = Agent(
        name="weather",
        model=model,
        generate_content_config=config,
        before_model_callback=colder,
    )

    await _run(store, agent, model)

    assert gemini.requests[0].body["generationConfig"]["temperature"] == 0.0
    assert config.temperature == 0.2  # the agent's stays as it was built


class Forecast(BaseModel):
    city: str
    sunny: bool


async def test_output_schema_reaches_gemini_as_the_response_schema_without_tools(
    gemini: FakeGemini, store: SessionStore
) -> None:
    gemini.reply(_text_reply('{"city": "Paris", "sunny": true}'))
    model = stand_in_model(gemini)
    agent = Agent(
        name="weather",
        model=model,
        output_schema=Forecast,
        output_key="forecast",
        generate_content_config=types.GenerateContentConfig(temperature=0.5),
    )

    await _run(store, agent, model)

    generation = gemini.requests[0].body["generationConfig"]
    assert generation["responseMimeType"] == "application/json"
    schema = generation.get("responseSchema") or generation.get("responseJsonSchema")
    assert schema is not None and set(schema["properties"]) == {"city", "sunny"}
    assert generation["temperature"] == 0.5


# -- ADK's planner=, code_executor= and built-in tools on the wire -------------------


def _thinking_then_call_reply() -> dict[str, Any]:
    """A thinking model's turn: a thought summary, then a call carrying the signature."""
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "The user wants Paris.", "thought": True},
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": _b64(b"sig-think"),
                        },
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }


async def test_a_built_in_planners_thinking_config_reaches_gemini_and_thoughts_go_back(
    gemini: FakeGemini, store: SessionStore
) -> None:
    gemini.reply(_thinking_then_call_reply())
    gemini.reply(_text_reply("Sunny."))
    model = stand_in_model(gemini)
    thinking = types.ThinkingConfig(include_thoughts=True, thinking_budget=512)
    agent = Agent(
        name="weather",
        tools=[get_weather],
        model=model,
        # ADK: the planner's thinking config replaces the generate_content_config's.
        generate_content_config=types.GenerateContentConfig(
            temperature=0.3, thinking_config=types.ThinkingConfig(thinking_budget=0)
        ),
        planner=BuiltInPlanner(thinking_config=thinking),
    )

    await _run(store, agent, model)

    assert len(gemini.requests) == 2
    for request in gemini.requests:  # on every model call
        generation = request.body["generationConfig"]
        # The SDK sends a nested config object's keys snake_cased; the API reads both.
        sent = {k.replace("_", "").lower(): v for k, v in generation["thinkingConfig"].items()}
        assert sent == {"includethoughts": True, "thinkingbudget": 512}
        assert generation["temperature"] == 0.3
        assert "planning" not in request.body["systemInstruction"]["parts"][0]["text"].lower()
    # The thinking turn goes back as it came: the thought kept, the signature with its call.
    turn = gemini.requests[1].body["contents"][1]
    assert turn["parts"][0] == {"text": "The user wants Paris.", "thought": True}
    assert base64.b64decode(turn["parts"][1]["thoughtSignature"]) == b"sig-think"
    assert turn["parts"][1]["functionCall"]["name"] == "get_weather"
    assert agent.generate_content_config is not None  # the agent's own is unchanged
    assert agent.generate_content_config.thinking_config == types.ThinkingConfig(thinking_budget=0)


async def test_a_plan_re_act_planners_instruction_reaches_gemini_and_its_tags_become_thoughts(
    gemini: FakeGemini, store: SessionStore
) -> None:
    tagged = f"{PLANNING_TAG}1. Answer from memory.{FINAL_ANSWER_TAG}Sunny."
    gemini.reply(_text_reply(tagged))
    model = stand_in_model(gemini)
    agent = Agent(name="weather", instruction="Be brief.", model=model, planner=PlanReActPlanner())

    session = await _run(store, agent, model)

    instruction = gemini.requests[0].body["systemInstruction"]["parts"][0]["text"]
    assert instruction.startswith("Be brief.")
    assert PLAN_RE_ACT_INSTRUCTION.strip() in instruction
    assert "thinkingConfig" not in gemini.requests[0].body.get("generationConfig", {})
    answer = session.events[-1].content
    assert answer is not None and answer.parts is not None
    assert [(p.text, p.thought) for p in answer.parts] == [
        ("1. Answer from memory.", True),
        ("Sunny.", None),
    ]
    assert text_of(answer) == "Sunny."


async def test_gemini_built_in_tools_reach_gemini_as_tools_not_function_declarations(
    gemini: FakeGemini, store: SessionStore
) -> None:
    gemini.reply(_text_reply("Sunny."))
    model = stand_in_model(gemini)
    agent = Agent(
        name="weather",
        tools=[google_search, get_weather, url_context],
        model=model,
        code_executor=BuiltInCodeExecutor(),
    )

    await _run(store, agent, model)

    tools = gemini.requests[0].body["tools"]
    declared = [d["name"] for t in tools for d in t.get("functionDeclarations", [])]
    assert declared == ["get_weather"]  # the built-in ones are no functions
    kinds = sorted(k for t in tools for k in t if k != "functionDeclarations")
    assert kinds == ["codeExecution", "googleSearch", "urlContext"]
    assert {"google_search", "url_context"}.isdisjoint(agent.function_tools)
    assert [t.name for t in agent.all_tools()] == ["get_weather"]  # nothing for the workers
