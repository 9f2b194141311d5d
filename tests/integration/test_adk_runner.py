"""ADK's client side on real workers: toolfleet.adk's Runner and session services,
completing a long-running call by a FunctionResponse message, and a ported example."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.genai import types

from examples import reimbursement
from toolfleet.adk import Event, RedisSessionService, Runner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop import runner as fleet_runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import AlreadyCompletedError, CallNotPendingError

pytestmark = pytest.mark.integration

APPROVAL = {"purpose": "meals", "amount": 250}
MODEL = ScriptedModel(
    [
        call(Call("ask_for_approval", APPROVAL)),
        say("I asked for approval."),
        lambda v: say(f"Update: {v.response('ask_for_approval')['status']}."),
        call(Call("reimburse", APPROVAL)),
        lambda v: say(f"Paid {v.response('reimburse')['paid']}."),
    ]
)


def texts(events: list[Event]) -> list[str]:
    return ["".join(p.text or "" for p in e.content.parts or ()) for e in events if e.content]


def reply(original: types.FunctionResponse, /, **update: Any) -> types.Content:
    part = types.Part(function_response=original.model_copy(update=update))
    return types.Content(role="user", parts=[part])


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    def choose(agent: Agent, settings: Settings) -> Model:
        return MODEL

    monkeypatch.setattr(fleet_runner, "choose_model", choose)


async def test_adks_runner_pauses_on_a_long_running_call_and_a_message_completes_it(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], scripted: None
) -> None:
    service = RedisSessionService(settings)
    session = await service.create_session(
        app_name="expenses", user_id="u1", state={"team": "infra"}
    )
    stored = await service.get_session(app_name="expenses", user_id="u1", session_id=session.id)
    assert stored is not None and stored.state["team"] == "infra"
    assert await service.get_session(app_name="other", user_id="u1", session_id=session.id) is None
    runner = Runner(agent=reimbursement.agent, app_name="expenses", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="Please reimburse 250$ for meals")])

    first = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]
    (turn,) = [e for e in first if e.get_function_calls()]
    (pending_call,) = turn.get_function_calls()
    assert turn.long_running_tool_ids == {pending_call.id} and turn.is_final_response()
    (initial,) = [r for e in first for r in e.get_function_responses()]
    assert initial.id == pending_call.id and initial.response["status"] == "pending"
    assert texts(first)[-1] == "I asked for approval." and first[-1].is_final_response()
    assert all(e.author == "reimbursement_agent" and e.invocation_id for e in first)

    # Another user's session of the same id is his own: u1's call is not pending there,
    # and a response to it sent there completes nothing (as for a call that never was).
    await service.create_session(app_name="expenses", user_id="u2", session_id=session.id)
    forged = reply(initial, response={"status": "approved"})
    with pytest.raises(CallNotPendingError, match="no pending call with id"):
        async for _ in runner.run_async(user_id="u2", session_id=session.id, new_message=forged):
            pass

    # An intermediate response reaches the model, as in ADK; the call stays pending.
    update = reply(initial, response={"status": "reviewing"}, will_continue=True)
    second = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=update)
    ]
    assert texts(second) == ["Update: reviewing."]

    # The final one, through the sync generator: applied once, the agent goes on.
    final = reply(initial, response={"status": "approved"})
    third = await asyncio.to_thread(
        lambda: list(runner.run(user_id="u1", session_id=session.id, new_message=final))
    )
    assert [c.name for e in third for c in e.get_function_calls()] == ["reimburse"]
    assert texts(third)[-1] == "Paid $250.00 for meals." and third[-1].is_final_response()
    with pytest.raises(AlreadyCompletedError):
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=final):
            pass

    ended = await service.get_session(app_name="expenses", user_id="u1", session_id=session.id)
    assert ended is not None and ended.app_name == "expenses"
    with pytest.raises(ValueError, match="Session not found"):
        async for _ in runner.run_async(user_id="u3", session_id=session.id, new_message=ask):
            pass
