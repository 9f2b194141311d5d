"""A user's own BaseLlm subclass as an agent's model: ADK's request shape in, its
LlmResponses out, function calls dispatched like any model's."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types

from tests.rule_llm import RuleLlm
from tests.support import InProcessRunner
from toolfleet.adk import Agent, BaseLlm, LlmRequest, LlmResponse
from toolfleet.orchestrator.agents.model_choice import choose_model, describe_choice
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ModelError
from toolfleet.shared.keys import Keys
from toolfleet.shared.metrics import metrics


def count_words(text: str) -> dict[str, int]:
    """Counts the words of a text.

    Args:
        text: The text.
    """
    return {"words": len(text.split())}


async def _run(agent: Agent, store: SessionStore, text: str) -> list[Any]:
    session = await store.create("app", "u1")
    settings = Settings()
    invocation = Invocation(
        agent,
        lambda a: choose_model(a, settings),
        session,
        store,
        InProcessRunner(),
        settings,
        Keys("t"),
    )
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [u async for u in run_invocation(invocation, message)]


async def test_a_users_base_llm_drives_the_agent_with_adks_request(store: SessionStore) -> None:
    model = RuleLlm(model="rule-counter", tool="count_words", arg="text")
    agent = Agent(name="counter", instruction="Count words.", tools=[count_words], model=model)
    tokens = metrics().model_tokens
    before = [tokens.labels("rule-counter", kind)._value.get() for kind in ("input", "output")]

    updates = await _run(agent, store, "one two three")

    final = [u for u in updates if isinstance(u, Event) and u.author == "counter"][-1]
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == 'count_words: {"words": 3} (by rule-counter)'
    first, second = model.requests
    assert isinstance(first, LlmRequest)
    assert first.model == "rule-counter"
    assert "Count words." in str(first.config.system_instruction)
    (tool,) = first.config.tools
    (declared,) = tool.function_declarations
    assert declared.name == "count_words"
    assert declared.parameters_json_schema["properties"]["text"]["type"] == "string"
    assert [c.role for c in second.contents] == ["user", "model", "user"]
    # The model's own call id goes back to it with the response.
    (call,) = [p.function_call for p in second.contents[1].parts if p.function_call]
    (response,) = [p.function_response for p in second.contents[2].parts if p.function_response]
    assert call.id == response.id == "rule-call-1"
    assert response.response == {"words": 3}
    assert describe_choice(agent, model) == "model: rule-counter (the agent's own)"
    # Each complete response's usage is counted (5 in, 3 out per call); the partial is not.
    after = [tokens.labels("rule-counter", kind)._value.get() for kind in ("input", "output")]
    assert [a - b for a, b in zip(after, before, strict=True)] == [10, 6]


async def test_an_error_response_is_a_model_error(store: SessionStore) -> None:
    model = RuleLlm(model="rule-counter", tool="not_offered", arg="text")
    agent = Agent(name="counter", tools=[count_words], model=model)

    with pytest.raises(ModelError, match="NO_TOOL: not_offered is not offered"):
        await _run(agent, store, "one two")


async def test_a_model_that_raises_is_a_model_error_an_on_model_error_callback_may_answer(
    store: SessionStore,
) -> None:
    class Broken(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            raise RuntimeError("quota gone")
            yield

    def fallback(callback_context: Any, llm_request: Any, error: Exception) -> LlmResponse:
        return LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"sorry: {error}")])
        )

    agent = Agent(name="broken", model=Broken(model="b-1"), on_model_error_callback=fallback)

    updates = await _run(agent, store, "hi")

    final = [u for u in updates if isinstance(u, Event) and u.author == "broken"][-1]
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == "sorry: model b-1 failed: RuntimeError: quota gone"


def test_a_sub_agent_naming_no_model_inherits_its_parents_base_llm() -> None:
    model = RuleLlm(model="rule-counter", tool="count_words", arg="text")
    child = Agent(name="child", tools=[count_words])
    named = Agent(name="named", model="gemini-2.0-flash", offline_script=[])
    Agent(name="root", model=model, sub_agents=[child, named])

    assert choose_model(child, Settings()) is model
    assert describe_choice(child, model) == "model: rule-counter (its parent's)"
    assert choose_model(named, Settings()) is not model


def test_base_llm_has_adks_shape() -> None:
    with pytest.raises(TypeError):
        BaseLlm(model="abstract")  # type: ignore[abstract]
    assert RuleLlm.supported_models() == [r"rule-.*"]
    assert BaseLlm.supported_models() == []
    response = LlmResponse(error_code="X", error_message="y")
    assert response.content is None and response.get_function_calls() == []
    # Every field a model of ADK's commonly sets is taken by keyword.
    LlmResponse(
        content=None,
        partial=False,
        turn_complete=True,
        finish_reason=types.FinishReason.STOP,
        model_version="v1",
        custom_metadata={"k": 1},
        grounding_metadata=types.GroundingMetadata(),
        citation_metadata=types.CitationMetadata(),
        interrupted=False,
        avg_logprobs=-0.1,
        logprobs_result=types.LogprobsResult(),
    )


def test_another_packages_model_class_is_refused_naming_toolfleets() -> None:
    class LiteLlm:  # as google.adk.models.lite_llm's would be: no `generate`
        model = "openai/gpt-4o"

    with pytest.raises(TypeError) as info:
        Agent(name="a", model=LiteLlm())  # type: ignore[arg-type]

    assert "toolfleet.adk's LiteLlm or a subclass of its BaseLlm" in str(info.value)
    assert f"{__name__}." in str(info.value)
