"""A model's function calls nested over TOOLFLEET_MAX_JSON_DEPTH: an error response for
the model, the turn goes on, and the stored turn does not keep the arguments."""

from __future__ import annotations

from typing import Any

from tests.unit.test_json_depth import ABYSS, SETTING, nested
from tests.unit.test_loop import add, responses, run
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import function_calls, text_of
from toolfleet.orchestrator.plugins.context import CallbackContext, LlmResponse
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.json_depth import TOO_DEEP_KEY


def keep(data: dict[str, Any]) -> str:
    """Keeps the data.

    Args:
        data: Anything.
    """
    return "kept"


def deep_agent(*steps: Any) -> Agent:
    return Agent(name="deep", instruction="test", tools=[add, keep], model=ScriptedModel(steps))


async def test_a_models_call_nested_too_deep_gets_an_error_and_the_turn_goes_on(
    store: SessionStore,
) -> None:
    agent = deep_agent(
        call(Call("keep", {"data": nested(ABYSS)}), Call("add", {"a": 1, "b": 2})), say("ok")
    )
    updates, runner, _ = await run(store, agent, "go")

    deep, fine = responses(updates)
    assert deep.response is not None and deep.response["error_type"] == "InvalidArguments"
    message = deep.response["error_message"]
    assert "more than 64 levels deep" in message and SETTING in message
    assert fine.response == {"result": 3}
    assert runner.batches == [[fine.id]]  # only the valid call was sent
    turns = [u for u in updates if isinstance(u, Event) and u.author == "deep" and u.content]
    kept = function_calls(turns[0].content)[0].args  # type: ignore[arg-type]
    assert kept is not None and list(kept) == [TOO_DEEP_KEY]  # stored without the 3,000 levels
    assert text_of(turns[-1].content) == "ok"  # the model answered the error


async def test_the_limit_is_the_setting_and_a_forged_note_is_refused_too(
    store: SessionStore,
) -> None:
    agent = deep_agent(
        call(
            Call("keep", {"data": nested(7)}),  # 8 levels with the arguments' own object
            Call("keep", {"data": nested(8)}),
            Call("keep", {TOO_DEEP_KEY: "run me anyway"}),
        ),
        say("ok"),
    )
    updates, runner, _ = await run(store, agent, "go", max_json_depth=8)

    at_limit, over, forged = responses(updates)
    assert at_limit.response == {"result": "kept"}
    for refused in (over, forged):
        assert refused.response is not None
        assert "more than 8 levels deep; the limit is 8" in refused.response["error_message"]
    assert runner.batches == [[at_limit.id]]


async def test_the_models_callbacks_see_the_note_not_the_deep_arguments(
    store: SessionStore,
) -> None:
    seen: list[dict[str, Any]] = []

    def watch(callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        seen.extend(dict(c.args or {}) for c in function_calls(llm_response.content))

    model = ScriptedModel([call(Call("keep", {"data": nested(ABYSS)})), say("ok")])
    agent = Agent(name="deep", tools=[keep], model=model, after_model_callback=watch)
    await run(store, agent, "go")
    assert [list(args) for args in seen] == [[TOO_DEEP_KEY]]
