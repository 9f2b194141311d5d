"""ADK's client answers a confirmation as ADK's does: the run yields an
`adk_request_confirmation` call, and a function response to it confirms the call, which
then runs on a real worker (counted by the tool itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from tests.integration import confirm_tools
from toolfleet.adk import (
    Agent,
    BasePlugin,
    Event,
    RedisSessionService,
    Runner,
    ToolConfirmation,
)
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration


def moved(view: ScriptView) -> str:
    return f"moved: {view.response('transfer_money')}"


@pytest.mark.parametrize(
    "answered",
    [{"confirmed": True}, {"response": '{"confirmed": true}'}],
    ids=["as a program answers", "as ADK's dev UI wraps it"],
)
async def test_adks_client_confirms_through_adk_request_confirmation(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    tmp_path: Path,
    answered: dict[str, object],
) -> None:
    counter = tmp_path / "transfers"
    script = [
        call(Call("transfer_money", {"amount": 70, "counter_file": str(counter)})),
        say(moved),
    ]
    agent = Agent(
        name="payer", tools=[confirm_tools.transfer_money_tool], model=ScriptedModel(script)
    )
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="payments", user_id="u1")
    runner = Runner(agent=agent, app_name="payments", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="pay 70")])

    first: list[Event] = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]
    requests = [
        c for e in first for c in e.get_function_calls() if c.name == "adk_request_confirmation"
    ]
    (request,) = requests
    original = request.args["originalFunctionCall"]  # type: ignore[index]
    assert original["name"] == "transfer_money" and original["args"]["amount"] == 70
    asked = ToolConfirmation.model_validate(request.args["toolConfirmation"])  # type: ignore[index]
    assert asked.confirmed is False and "approve or reject" in asked.hint
    assert not counter.exists()  # not sent before the answer

    answer = types.FunctionResponse(
        id=request.id, name="adk_request_confirmation", response=answered
    )
    reply = types.Content(role="user", parts=[types.Part(function_response=answer)])
    after = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=reply)
    ]
    texts = ["".join(p.text or "" for p in e.content.parts or ()) for e in after if e.content]
    assert texts[-1] == "moved: {'moved': 70, 'runs': 1, 'confirmed': True}"
    assert counter.read_text() == "1"


async def test_adks_runner_takes_plugins(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    counter = tmp_path / "transfers"

    class Blocker(BasePlugin):
        async def before_tool_callback(
            self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any
        ) -> dict[str, Any] | None:
            return {"blocked": tool.name}

    script = [
        call(Call("transfer_checked", {"amount": 5, "counter_file": str(counter)})),
        say(lambda v: f"result: {v.response('transfer_checked')}"),
    ]
    agent = Agent(
        name="payer", tools=[confirm_tools.transfer_checked_tool], model=ScriptedModel(script)
    )
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="payments", user_id="u1")
    runner = Runner(
        agent=agent, app_name="payments", session_service=service, plugins=[Blocker("blocker")]
    )
    ask = types.Content(role="user", parts=[types.Part(text="pay 5")])
    events = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]
    texts = ["".join(p.text or "" for p in e.content.parts or ()) for e in events if e.content]
    assert texts[-1] == "result: {'blocked': 'transfer_checked'}"
    assert not counter.exists()  # the plugin answered: no worker ran it


async def test_a_tool_that_asked_runs_again_with_the_answer_through_adks_client(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    """The confirmed call's second run answers it: each run_async reads the results
    stream afresh, and the first run's result (which asked) is no longer there."""
    counter = tmp_path / "trips"
    script = [
        call(Call("book_trip", {"city": "Oslo", "counter_file": str(counter)})),
        say(lambda v: f"asked: {v.response('book_trip')}"),
        say(lambda v: f"booked: {v.response('book_trip')}"),
    ]
    agent = Agent(name="trips", tools=[confirm_tools.book_trip_tool], model=ScriptedModel(script))
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="trips", user_id="u1")
    runner = Runner(agent=agent, app_name="trips", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="book Oslo")])
    first = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]
    (request,) = [
        c for e in first for c in e.get_function_calls() if c.name == "adk_request_confirmation"
    ]
    # As in ADK, the model answered the tool's interim response in the same run.
    said = ["".join(p.text or "" for p in e.content.parts or ()) for e in first if e.content]
    assert said[-1] == "asked: {'status': 'awaiting approval'}"

    answer = types.FunctionResponse(
        id=request.id,
        name="adk_request_confirmation",
        response={"confirmed": True, "payload": {"city": "Oslo", "nights": 3}},
    )
    reply = types.Content(role="user", parts=[types.Part(function_response=answer)])
    after = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=reply)
    ]

    assert not [c for e in after for c in e.get_function_calls()]  # not asked again
    texts = ["".join(p.text or "" for p in e.content.parts or ()) for e in after if e.content]
    assert texts[-1] == "booked: {'booked': {'city': 'Oslo', 'nights': 3}, 'runs': 1}"
    assert counter.read_text() == "1"
