"""ADK's limits on Gemini's built-in tools: google_search on an agent that may transfer
(on the wire: the real google-genai client against the local Gemini stand-in, driven
by the loop), and the built-in tools on a model that is not Gemini."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
from google.genai import types

from tests.gemini_stand_in import FakeGemini, serve_gemini
from tests.unit.test_gemini_config import _run
from tests.unit.test_gemini_model import _text_reply
from toolfleet.adk import (
    BaseLlm,
    BuiltInCodeExecutor,
    LlmRequest,
    LlmResponse,
    google_search,
    url_context,
)
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.gemini import GeminiModel
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.errors import ConfigError


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with serve_gemini() as fake:
        yield fake


def _model(fake: FakeGemini, name: str) -> GeminiModel:
    return GeminiModel(name, api_key="test-key", base_url=fake.base_url, initial_delay_s=0.01)


def _declared(body: dict[str, Any]) -> list[str]:
    return [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]


async def test_search_with_sub_agents_is_refused_on_gemini_2_and_sent_on_gemini_3(
    gemini: FakeGemini, store: SessionStore
) -> None:
    old = _model(gemini, "gemini-2.5-flash")
    helper = Agent(name="helper", model=old)
    agent = Agent(name="desk", tools=[google_search], sub_agents=[helper], model=old)
    with pytest.raises(ConfigError, match=r"'desk': google_search cannot go with transfer"):
        await _run(store, agent, old)
    assert gemini.requests == []  # refused before any call, as ADK

    gemini.reply(_text_reply("Found it."))
    new = _model(gemini, "gemini-3-pro-preview")
    agent = Agent(name="desk", tools=[google_search], sub_agents=[Agent(name="helper")], model=new)
    await _run(store, agent, new)
    body = gemini.requests[0].body
    assert _declared(body) == ["transfer_to_agent"]
    assert any("googleSearch" in t for t in body["tools"])


async def test_a_searching_sub_agent_on_gemini_2_is_not_offered_transfers(
    gemini: FakeGemini, store: SessionStore
) -> None:
    gemini.reply(_text_reply("Found it."))
    model = _model(gemini, "gemini-2.5-flash")
    searcher = Agent(name="searcher", tools=[google_search], model=model)
    Agent(name="root", sub_agents=[searcher, Agent(name="other")], model=model)

    await _run(store, searcher, model)

    body = gemini.requests[0].body
    assert _declared(body) == []  # ADK leaves transfer_to_agent out, and its instruction
    assert "transfer_to_agent" not in body["systemInstruction"]["parts"][0]["text"]
    assert [list(t) for t in body["tools"]] == [["googleSearch"]]


class Recording(BaseLlm):
    """A model of one's own that answers "ok" and keeps what it was asked."""

    asked: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.asked.append(llm_request)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="ok")]))


async def test_built_in_tools_are_refused_on_a_model_that_is_not_gemini(
    store: SessionStore,
) -> None:
    other = Recording(model="openai/gpt-4o", asked=[])
    agent = Agent(
        name="desk", tools=[url_context], model=other, code_executor=BuiltInCodeExecutor()
    )
    refused = r"url_context, code_execution run in Gemini .*openai/gpt-4o"
    with pytest.raises(ConfigError, match=refused):
        await _run(store, agent, other)
    assert other.asked == []  # not dropped unsaid: refused before the call

    routed = Recording(model="gemini/gemini-2.5-flash", asked=[])  # LiteLLM's Gemini name
    await _run(store, Agent(name="desk", tools=[google_search], model=routed), routed)
    [asked] = routed.asked
    assert asked.config is not None
    assert asked.config.tools == [types.Tool(google_search=types.GoogleSearch())]
