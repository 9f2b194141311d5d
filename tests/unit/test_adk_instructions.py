"""ADK's instruction fields and include_contents in the loop: instruction providers,
global_instruction, static_instruction (scripted model, fakeredis store)."""

from __future__ import annotations

import pytest
from google.genai import types

from tests.unit.test_adk_agent_fields import ending, run, seed
from tests.unit.test_loop import add
from toolfleet.adk import ReadonlyContext
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.transfer import TRANSFER_TO_AGENT
from toolfleet.orchestrator.loop.invocation import EndReason
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import Model, text_of
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.errors import ConfigError


async def test_instruction_providers_sync_or_async_are_called_with_a_readonly_context(
    store: SessionStore,
) -> None:
    seen: list[ReadonlyContext] = []

    def house_rules(context: ReadonlyContext) -> str:
        seen.append(context)
        return "House rules for {user}."  # a provider's text is used as it is

    async def own(context: ReadonlyContext) -> str:
        return f"Serve {context.state['guest']}."

    desk = Agent(name="desk", instruction=own, global_instruction=house_rules)
    models: dict[str, Model] = {"desk": ScriptedModel([say("ok")])}
    await seed(store, guest="Ann")

    await run(store, desk, models)

    request = models["desk"].requests[0]  # type: ignore[attr-defined]
    assert request.instruction.startswith("House rules for {user}.\n\nServe Ann.\n\n")
    assert seen[0].agent_name == "desk" and seen[0].state["guest"] == "Ann"


async def test_the_root_agents_global_instruction_goes_before_every_agents_own(
    store: SessionStore,
) -> None:
    support = Agent(name="support", instruction="Fix it.", global_instruction="ignored")
    desk = Agent(name="desk", global_instruction="Be kind to {guest?}.", sub_agents=[support])
    models: dict[str, Model] = {
        "desk": ScriptedModel([call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"}))]),
        "support": ScriptedModel([say("Fixed.")]),
    }

    await run(store, desk, models)

    request = models["support"].requests[0]  # type: ignore[attr-defined]
    assert request.instruction.startswith("Be kind to .\n\nFix it.\n\n")
    assert "ignored" not in request.instruction  # only the root's counts, as in ADK


async def test_static_instruction_is_the_system_instruction_and_the_rest_a_user_turn(
    store: SessionStore,
) -> None:
    model = ScriptedModel([say("ok")])
    agent = Agent(
        name="desk",
        model=model,
        static_instruction=types.Content(role="user", parts=[types.Part(text="Static.")]),
        instruction="Today is {day}.",
    )
    await seed(store, day="Monday")

    updates = await run(store, agent)

    request = model.requests[0]
    assert request.instruction.startswith("Static.\n\n")
    assert "Monday" not in request.instruction
    last = request.contents[-1]
    assert last.role == "user" and "Today is Monday." in text_of(last)
    assert "BEGIN_SYSTEM_INSTRUCTION" in text_of(last)
    # Sent, never stored: the session holds the conversation only.
    stored = await store.get_or_create("app", "u1", "s1")
    assert [text_of(e.content) for e in stored.events if e.content] == ["go", "ok"]
    assert ending(updates) is EndReason.ANSWERED
    with pytest.raises(ConfigError, match="static_instruction may hold text only"):
        Agent(name="a", static_instruction=types.Part(inline_data=types.Blob(data=b"x")))


async def test_include_contents_none_sends_the_current_turn_only(store: SessionStore) -> None:
    model = ScriptedModel(
        by_message={
            "first": [say("one")],
            "second": [call(Call("add", {"a": 1, "b": 2})), say("three")],
        }
    )
    agent = Agent(name="calc", tools=[add], model=model, include_contents="none")

    await run(store, agent, text="first")
    await run(store, agent, text="second")

    last = model.requests[-1]
    assert text_of(last.contents[0]) == "second"
    assert len(last.contents) == 3  # the message, the call, its response
    with pytest.raises(ConfigError, match="include_contents"):
        Agent(name="a", include_contents="all")  # type: ignore[arg-type]


async def test_include_contents_none_keeps_the_message_a_transfer_handed_over(
    store: SessionStore,
) -> None:
    support = Agent(name="support", include_contents="none")
    desk = Agent(name="desk", sub_agents=[support])
    models: dict[str, Model] = {
        "desk": ScriptedModel(
            by_message={
                "hello": [say("Hi.")],
                "broken": [call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"}))],
            }
        ),
        "support": ScriptedModel(by_message={"broken": [say("Fixed.")]}),
    }

    await run(store, desk, models, text="hello")
    await run(store, desk, models, text="it is broken")

    (request,) = models["support"].requests  # type: ignore[attr-defined]
    assert text_of(request.contents[0]) == "it is broken"  # not the handover
    assert len(request.contents) == 3  # the message, the transfer call, its response
