"""LiteLlm through the real litellm client against a local OpenAI-compatible stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types
from pydantic import BaseModel

from tests.openai_stand_in import (
    COMPLETIONS_PATH,
    FakeOpenAI,
    error_body,
    serve_openai,
    text_reply,
    tool_calls_reply,
)
from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ModelError
from toolfleet.shared.keys import Keys

pytest.importorskip("litellm", reason="LiteLlm needs the litellm extra")

from toolfleet.adk import LiteLlm


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with serve_openai() as fake:
        yield fake


def stand_in_model(fake: FakeOpenAI, **kwargs: Any) -> Any:
    return LiteLlm(model="openai/gpt-4o", api_base=fake.api_base, api_key="sk-test", **kwargs)


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Paris".
    """
    return {"city": city, "sky": "sunny"}


def get_time(tz: str) -> str:
    """Current time in a time zone.

    Args:
        tz: IANA time zone name.
    """
    return f"12:00 {tz}"


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _run(agent: Agent, store: SessionStore, text: str) -> tuple[list[Any], InProcessRunner]:
    model = agent.model
    assert model is not None and not isinstance(model, str)
    session = await store.create("app", "u1")
    runner = InProcessRunner()
    invocation = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
    return [u async for u in run_invocation(invocation, _user(text))], runner


async def test_a_parallel_turn_goes_to_the_fleet_and_back_as_tool_messages(
    server: FakeOpenAI, store: SessionStore
) -> None:
    server.reply(
        tool_calls_reply(
            ("call_w1", "get_weather", {"city": "Paris"}), ("call_t2", "get_time", {"tz": "UTC"})
        )
    )
    server.reply(text_reply("Sunny in Paris; noon UTC."))
    agent = Agent(
        name="weather",
        instruction="Be brief.",
        tools=[get_weather, get_time],
        model=stand_in_model(server),
        generate_content_config=types.GenerateContentConfig(temperature=0.25, max_output_tokens=99),
    )

    updates, runner = await _run(agent, store, "Paris weather and UTC time?")

    final = [u for u in updates if isinstance(u, Event) and u.author == "weather"][-1]
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == "Sunny in Paris; noon UTC."
    # Both calls of the turn were dispatched together, as one batch.
    assert [len(batch) for batch in runner.batches] == [2]
    assert len(server.requests) == 2
    first, second = server.requests
    for recorded in server.requests:
        assert recorded.path == COMPLETIONS_PATH
        headers = {k.lower(): v for k, v in recorded.headers.items()}
        assert headers["authorization"] == "Bearer sk-test"
        assert recorded.body["model"] == "gpt-4o"
        assert recorded.body["temperature"] == 0.25
        assert recorded.body["max_completion_tokens"] == 99
        assert [t["function"]["name"] for t in recorded.body["tools"]] == [
            "get_weather",
            "get_time",
        ]
    weather_tool = first.body["tools"][0]
    assert weather_tool["type"] == "function"
    assert weather_tool["function"]["description"].startswith("Current weather for a city.")
    assert weather_tool["function"]["parameters"]["properties"]["city"]["type"] == "string"
    system, user = first.body["messages"]
    assert system["role"] == "system" and "Be brief." in system["content"]
    assert user == {"role": "user", "content": "Paris weather and UTC time?"}

    # The second request: the model's turn with its own ids, then each response as a
    # tool message naming the call it answers.
    assert second.body["messages"][:2] == first.body["messages"]
    assistant, *tools = second.body["messages"][2:]
    assert assistant["role"] == "assistant"
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in assistant["tool_calls"]
    ] == [("call_w1", "get_weather", {"city": "Paris"}), ("call_t2", "get_time", {"tz": "UTC"})]
    assert sorted((t["role"], t["tool_call_id"], json.loads(t["content"])) for t in tools) == [
        ("tool", "call_t2", {"result": "12:00 UTC"}),
        ("tool", "call_w1", {"city": "Paris", "sky": "sunny"}),
    ]


async def test_an_http_error_is_a_model_error_that_names_the_status(
    server: FakeOpenAI, store: SessionStore
) -> None:
    server.reply(error_body("Incorrect API key provided", "invalid_api_key"), status=401)
    agent = Agent(name="weather", tools=[get_weather], model=stand_in_model(server))

    with pytest.raises(ModelError) as info:
        await _run(agent, store, "Paris?")

    assert "openai/gpt-4o" in str(info.value)
    assert "HTTP 401" in str(info.value)
    assert "Incorrect API key provided" in str(info.value)


async def test_an_on_model_error_callback_answers_a_failed_call(
    server: FakeOpenAI, store: SessionStore
) -> None:
    from toolfleet.adk import LlmResponse

    server.reply(error_body("upstream is down", "server_error"), status=400)
    seen: list[Exception] = []

    def fallback(callback_context: Any, llm_request: Any, error: Exception) -> Any:
        seen.append(error)
        return LlmResponse(types.Content(role="model", parts=[types.Part(text="Try later.")]))

    agent = Agent(
        name="weather",
        tools=[get_weather],
        model=stand_in_model(server),
        on_model_error_callback=fallback,
    )

    updates, _ = await _run(agent, store, "Paris?")

    final = [u for u in updates if isinstance(u, Event) and u.author == "weather"][-1]
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == "Try later."
    assert len(seen) == 1 and isinstance(seen[0], ModelError)
    assert "HTTP 400" in str(seen[0])


async def test_arguments_that_are_not_json_are_a_model_error(
    server: FakeOpenAI, store: SessionStore
) -> None:
    server.reply(tool_calls_reply(("call_1", "get_weather", '{"city": "Par')))
    agent = Agent(name="weather", tools=[get_weather], model=stand_in_model(server))

    with pytest.raises(ModelError, match="not JSON"):
        await _run(agent, store, "Paris?")


async def test_usage_and_model_name_come_through(server: FakeOpenAI) -> None:
    from toolfleet.adk import LlmRequest

    server.reply(text_reply("Hello."))
    model = stand_in_model(server)
    request = LlmRequest(contents=[_user("Hi")])

    responses = [r async for r in model.generate_content_async(request)]

    assert model.name == "openai/gpt-4o"
    # The key goes with each call, never into what a log or an error shows of the model.
    assert "sk-test" not in repr(model) and "sk-test" not in str(model.model_dump())
    (response,) = responses
    assert response.content.parts[0].text == "Hello."
    assert response.usage_metadata.prompt_token_count == 11
    assert response.usage_metadata.candidates_token_count == 7
    assert response.finish_reason == types.FinishReason.STOP
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "Hi"}]
    assert "tools" not in server.requests[0].body


class Forecast(BaseModel):
    city: str
    sky: str


async def test_an_output_schema_goes_as_the_response_format(
    server: FakeOpenAI, store: SessionStore
) -> None:
    server.reply(text_reply('{"city": "Paris", "sky": "sunny"}'))
    agent = Agent(name="forecaster", model=stand_in_model(server), output_schema=Forecast)

    updates, _ = await _run(agent, store, "Paris?")

    final = [u for u in updates if isinstance(u, Event) and u.author == "forecaster"][-1]
    assert final.content is not None and final.content.parts is not None
    assert Forecast.model_validate_json(final.content.parts[0].text or "").sky == "sunny"
    response_format = server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Forecast"
    assert response_format["json_schema"]["schema"]["properties"]["sky"]["type"] == "string"


async def test_a_long_running_calls_final_result_goes_as_a_user_message(
    server: FakeOpenAI,
) -> None:
    from toolfleet.adk import LlmRequest

    server.reply(text_reply("Approved, then."))
    call = types.FunctionCall(id="call_a", name="ask_approval", args={"amount": 5})

    def answered(response: dict[str, Any]) -> types.Content:
        return types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call_a", name="ask_approval", response=response
                    )
                )
            ],
        )

    contents = [
        _user("Pay 5."),
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        answered({"status": "pending"}),
        types.Content(role="model", parts=[types.Part(text="Waiting for approval.")]),
        answered({"status": "approved"}),
    ]

    [_ async for _ in stand_in_model(server).generate_content_async(LlmRequest(contents=contents))]

    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_call_id"] == "call_a"
    assert json.loads(sent[2]["content"]) == {"status": "pending"}
    assert sent[4]["content"] == (
        'The final result of ask_approval (call call_a): {"status": "approved"}'
    )
