"""An agent's generate_content_config on the wire: the real google-genai client against
the local Gemini stand-in, driven by the loop."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.genai import types
from pydantic import BaseModel

from tests.gemini_stand_in import FakeGemini, serve_gemini
from tests.support import InProcessRunner
from tests.unit.test_gemini_model import _text_reply, _user, get_weather, stand_in_model
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.plugins import CallbackContext, LlmRequest
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with serve_gemini() as fake:
        yield fake


async def _run(store: SessionStore, agent: Agent, model: object) -> None:
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
