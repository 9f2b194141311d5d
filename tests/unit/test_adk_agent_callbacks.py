"""ADK's before_agent_callback and after_agent_callback in the loop (scripted model,
in-process runner, fakeredis store)."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types

from tests.unit.test_adk_agent_fields import ending, events, model_text, run, seed
from toolfleet.adk import BasePlugin, CallbackContext
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.transfer import TRANSFER_TO_AGENT
from toolfleet.orchestrator.loop.invocation import EndReason
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import Model, text_of
from toolfleet.orchestrator.sessions.store import SessionStore


async def test_before_agent_returning_content_answers_in_the_agents_place(
    store: SessionStore,
) -> None:
    seen: list[str] = []

    def note(callback_context: CallbackContext) -> None:
        seen.append(callback_context.agent_name)
        callback_context.state["checked"] = True

    async def closed(callback_context: CallbackContext) -> types.Content:
        return model_text("We are closed.")

    def never(callback_context: CallbackContext) -> None:
        raise AssertionError("after the one that answered")

    model = ScriptedModel([say("should not be asked")])
    agent = Agent(
        name="desk",
        model=model,
        output_key="out",
        before_agent_callback=[note, closed, never],
        after_agent_callback=never,  # the invocation ended in the before callback
    )

    updates = await run(store, agent)

    _, answer = events(updates)
    assert answer.author == "desk" and text_of(answer.content) == "We are closed."
    # ADK's LlmAgent saves the callback's answer under output_key too (google-adk 2.13).
    assert answer.state_delta == {"checked": True, "out": "We are closed."}
    assert model.requests == [] and seen == ["desk"]
    assert ending(updates) is EndReason.ANSWERED
    stored = await store.get_or_create("app", "u1", "s1")
    assert stored.state["checked"] is True and stored.open_turn() is None


async def test_before_agent_writing_state_lets_the_agent_run_and_see_it(
    store: SessionStore,
) -> None:
    async def greet(callback_context: CallbackContext) -> None:
        callback_context.state["guest"] = "Ann"

    model = ScriptedModel([say("Hello Ann")])
    agent = Agent(
        name="desk", instruction="Greet {guest}.", model=model, before_agent_callback=greet
    )

    updates = await run(store, agent)

    _, state_only, answer = events(updates)
    assert state_only.content is None and state_only.state_delta == {"guest": "Ann"}
    assert model.requests[0].instruction.startswith("Greet Ann.")
    assert text_of(answer.content) == "Hello Ann"


async def test_after_agent_runs_after_the_answer_and_its_content_follows_it(
    store: SessionStore,
) -> None:
    seen: list[Any] = []

    async def sign(callback_context: CallbackContext) -> types.Content:
        seen.append(callback_context.state.get("out"))  # output_key's save is in state
        callback_context.state["signed"] = True
        return types.Content(parts=[types.Part(text="-- the desk")])

    agent = Agent(
        name="desk",
        model=ScriptedModel([say("Done.")]),
        output_key="out",
        after_agent_callback=sign,
    )

    updates = await run(store, agent)

    answer, signature = events(updates)[-2:]
    assert text_of(answer.content) == "Done."
    assert signature.author == "desk" and text_of(signature.content) == "-- the desk"
    assert signature.content is not None and signature.content.role == "model"
    assert signature.state_delta == {"signed": True}
    assert seen == ["Done."]
    stored = await store.get_or_create("app", "u1", "s1")
    assert [text_of(e.content) for e in stored.events[-2:]] == ["Done.", "-- the desk"]


async def test_agent_callbacks_run_for_a_transfer_target_and_unwind_in_order(
    store: SessionStore,
) -> None:
    order: list[str] = []

    def enter(name: str) -> Any:
        return lambda callback_context: order.append(f"before {name}")

    def leave(name: str) -> Any:
        return lambda callback_context: order.append(f"after {name}")

    support = Agent(
        name="support",
        before_agent_callback=enter("support"),
        after_agent_callback=leave("support"),
    )
    desk = Agent(
        name="desk",
        sub_agents=[support],
        before_agent_callback=enter("desk"),
        after_agent_callback=leave("desk"),
    )
    models: dict[str, Model] = {
        "desk": ScriptedModel([call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"}))]),
        "support": ScriptedModel([say("Support here.")]),
    }

    updates = await run(store, desk, models)

    assert text_of(events(updates)[-1].content) == "Support here."
    assert order == ["before desk", "before support", "after support", "after desk"]


async def test_an_agent_callback_must_return_content_or_none(store: SessionStore) -> None:
    async def wrong(callback_context: CallbackContext) -> str:
        return "text"

    agent = Agent(name="a", model=ScriptedModel([say("x")]), before_agent_callback=wrong)
    with pytest.raises(TypeError, match=r"before_agent_callback .*types\.Content or None"):
        await run(store, agent)


async def test_a_plugins_agent_callbacks_go_first_and_answer_for_every_agent(
    store: SessionStore,
) -> None:
    order: list[str] = []

    class Gate(BasePlugin):
        async def before_agent_callback(
            self, *, agent: Any, callback_context: CallbackContext
        ) -> types.Content | None:
            order.append(f"plugin before {agent.name}")
            return model_text("Closed today.") if callback_context.state.get("closed") else None

        async def after_agent_callback(
            self, *, agent: Any, callback_context: CallbackContext
        ) -> None:
            order.append(f"plugin after {agent.name}")

    def own(callback_context: CallbackContext) -> None:
        order.append("agent before")

    agent = Agent(name="desk", model=ScriptedModel([say("Open.")]), before_agent_callback=own)

    updates = await run(store, agent, plugins=(Gate("gate"),))

    assert text_of(events(updates)[-1].content) == "Open."
    assert order == ["plugin before desk", "agent before", "plugin after desk"]

    await seed(store, closed=True)
    order.clear()
    updates = await run(store, agent, plugins=(Gate("gate"),))

    assert text_of(events(updates)[-1].content) == "Closed today."
    assert order == ["plugin before desk"]  # the agent's own is skipped, as in ADK


async def test_tool_callbacks_run_around_transfer_to_agent_as_around_any_tool(
    store: SessionStore,
) -> None:
    seen: list[str] = []

    def before(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
        seen.append(f"before {tool.name} {args}")

    def after(tool: Any, args: dict[str, Any], tool_context: Any, tool_response: Any) -> None:
        seen.append(f"after {tool.name} {tool_response}")

    support = Agent(name="support")
    desk = Agent(
        name="desk",
        sub_agents=[support],
        before_tool_callback=before,
        after_tool_callback=after,
    )
    models: dict[str, Model] = {
        "desk": ScriptedModel([call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"}))]),
        "support": ScriptedModel([say("Support here.")]),
    }

    updates = await run(store, desk, models)

    assert text_of(events(updates)[-1].content) == "Support here."
    assert seen == [
        "before transfer_to_agent {'agent_name': 'support'}",
        "after transfer_to_agent {'result': None}",
    ]


async def test_a_before_tool_callback_may_answer_a_transfer_in_its_place(
    store: SessionStore,
) -> None:
    def refuse(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any]:
        return {"result": "transfers are closed"}

    support = Agent(name="support")
    desk = Agent(name="desk", sub_agents=[support], before_tool_callback=refuse)
    models: dict[str, Model] = {
        "desk": ScriptedModel(
            [call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"})), say("Desk still.")]
        ),
        "support": ScriptedModel([say("Support here.")]),
    }

    updates = await run(store, desk, models)

    assert text_of(events(updates)[-1].content) == "Desk still."  # no transfer happened
