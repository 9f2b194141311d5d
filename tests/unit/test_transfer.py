"""ADK's automatic transfer_to_agent: declared, answered in the orchestrator, continued
with the target agent, and stored with the turn's other responses in one step."""

from __future__ import annotations

from typing import Any

from google.genai import types

from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.transfer import TRANSFER_TO_AGENT, offered_tools
from toolfleet.orchestrator.loop.foreign import PREAMBLE, QUOTED_BEGIN, QUOTED_END
from toolfleet.orchestrator.loop.invocation import Invocation, InvocationEnded, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import Model, text_of
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.toolsets import ReadonlyContext


def lookup_invoice(number: str) -> dict[str, str]:
    """Looks up an invoice.

    Args:
        number: The invoice number.
    """
    return {"number": number, "status": "paid"}


def team(root_steps: list[Any], support_steps: list[Any]) -> tuple[Agent, dict[str, Model]]:
    models: dict[str, Model] = {
        "desk": ScriptedModel(root_steps),
        "support": ScriptedModel(support_steps),
        "billing": ScriptedModel([say("billing here")]),
    }
    support = Agent(name="support", description="Handles urgent problems.")
    billing = Agent(name="billing", description="Answers invoice questions.")
    desk = Agent(
        name="desk",
        instruction="You are the front desk.",
        tools=[lookup_invoice],
        sub_agents=[support, billing],
    )
    return desk, models


async def run(
    store: SessionStore, agent: Agent, models: dict[str, Model]
) -> tuple[list[Update], InProcessRunner, Invocation]:
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner()
    inv = Invocation(agent, lambda a: models[a.name], session, store, runner, Settings(), Keys("t"))
    message = types.Content(role="user", parts=[types.Part(text="this is urgent")])
    return [u async for u in run_invocation(inv, message)], runner, inv


def response_events(updates: list[Update]) -> list[Event]:
    return [u for u in updates if isinstance(u, Event) and u.calls]


def responses(event: Event) -> dict[str, types.FunctionResponse]:
    assert event.content is not None
    return {
        p.function_response.name or "": p.function_response
        for p in event.content.parts or ()
        if p.function_response
    }


async def test_the_model_transfers_on_its_own_and_the_target_answers(
    store: SessionStore,
) -> None:
    desk, models = team(
        [call(Call(TRANSFER_TO_AGENT, {"agent_name": "support"}))], [say("Support here.")]
    )
    updates, runner, inv = await run(store, desk, models)

    assert runner.batches == []  # no worker was needed
    (event,) = response_events(updates)
    answered = responses(event)[TRANSFER_TO_AGENT]
    assert answered.response == {"result": None}
    assert event.actions.transfer_to_agent == "support"
    assert [c.status.value for c in event.calls] == ["success"]
    final = [u for u in updates if isinstance(u, Event)][-1]
    assert final.author == "support" and text_of(final.content) == "Support here."
    assert isinstance(updates[-1], InvocationEnded)
    stored = await store.get(inv.session.key)
    assert stored.active_agent == "support"  # the next message goes to support too
    assert stored.open_turn() is None  # the call was answered and closed in its step
    # The target saw the transfer call and its response as ADK shows another agent's
    # turns: "For context:" user text, never as model turns of its own.
    support_model = models["support"]
    assert isinstance(support_model, ScriptedModel)
    seen = support_model.requests[0].contents
    assert [(c.role, [p.text for p in c.parts or ()]) for c in seen] == [
        ("user", ["this is urgent"]),
        ("user", [PREAMBLE, f"[desk] called tool `{TRANSFER_TO_AGENT}` with parameters:\n"
                  f"{QUOTED_BEGIN}\n{{'agent_name': 'support'}}\n{QUOTED_END}"]),
        ("user", [PREAMBLE, f"[desk] `{TRANSFER_TO_AGENT}` tool returned result:\n"
                  f"{QUOTED_BEGIN}\n{{'result': None}}\n{QUOTED_END}"]),
    ]  # fmt: skip


async def test_transfer_and_a_worker_call_of_one_turn_are_answered_in_one_step(
    store: SessionStore,
) -> None:
    desk, models = team(
        [
            call(
                Call("lookup_invoice", {"number": "INV-7"}),
                Call(TRANSFER_TO_AGENT, {"agent_name": "support"}),
            )
        ],
        [say("Support here; INV-7 is paid.")],
    )
    updates, runner, _ = await run(store, desk, models)

    assert len(runner.batches) == 1 and len(runner.batches[0]) == 1  # only the real tool
    (event,) = response_events(updates)  # both responses, in call order, in one event
    assert list(responses(event)) == ["lookup_invoice", TRANSFER_TO_AGENT]
    assert responses(event)["lookup_invoice"].response == {"number": "INV-7", "status": "paid"}
    assert [u for u in updates if isinstance(u, Event)][-1].author == "support"


async def test_an_unknown_target_is_an_error_for_the_model_and_nothing_moves(
    store: SessionStore,
) -> None:
    desk, models = team(
        [call(Call(TRANSFER_TO_AGENT, {"agent_name": "sales"})), say("I'll help myself.")], []
    )
    updates, _, inv = await run(store, desk, models)

    (event,) = response_events(updates)
    error = responses(event)[TRANSFER_TO_AGENT].response or {}
    assert error["error_type"] == "UnknownAgent"
    assert "transfer to one of: support, billing" in error["error_message"]
    assert event.actions.transfer_to_agent is None
    assert [u for u in updates if isinstance(u, Event)][-1].author == "desk"
    assert (await store.get(inv.session.key)).active_agent is None


CONTEXT = ReadonlyContext.of(
    {}, agent_name="a", invocation_id="i", session_id="s", user_id="u", app_name="app"
)


async def test_the_declaration_and_instruction_name_adks_targets(store: SessionStore) -> None:
    desk, models = team([say("hello")], [])
    await run(store, desk, models)
    desk_model = models["desk"]
    assert isinstance(desk_model, ScriptedModel)
    request = desk_model.requests[0]
    (declared,) = [t for t in request.tools if t.name == TRANSFER_TO_AGENT]
    schema = declared.parameters_json_schema
    assert schema["properties"]["agent_name"]["enum"] == ["support", "billing"]
    assert schema["required"] == ["agent_name"]
    assert request.instruction.startswith("You are the front desk.\n\n")
    assert "Agent name: billing\nAgent description: Answers invoice questions." in (
        request.instruction
    )

    # A sub-agent may go back to its parent and to its peers, as in ADK ...
    support = desk.find_agent("support")
    assert support is not None
    tools = await offered_tools(support, lambda: CONTEXT)
    targets = tools[TRANSFER_TO_AGENT].parameters_json_schema["properties"]["agent_name"]
    assert targets["enum"] == ["desk", "billing"]
    # ... unless it disallows that; an agent with nowhere to go gets no such function.
    alone = Agent(name="alone", disallow_transfer_to_parent=True, disallow_transfer_to_peers=True)
    Agent(name="top", sub_agents=[alone])
    assert TRANSFER_TO_AGENT not in await offered_tools(alone, lambda: CONTEXT)
    assert TRANSFER_TO_AGENT not in await offered_tools(Agent(name="solo"), lambda: CONTEXT)
    # Every model step offers it: built once per set of targets, not once per step.
    again = await offered_tools(support, lambda: CONTEXT)
    assert again[TRANSFER_TO_AGENT] is tools[TRANSFER_TO_AGENT]
    # Workers are never asked to serve it.
    assert TRANSFER_TO_AGENT not in {t.name for t in desk.all_tools()}
