"""ADK's event shape on toolfleet's Event, and what ADK's Runner refuses or needs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from google.genai import types

from examples import reimbursement
from toolfleet.adk import (
    Agent,
    AgentTool,
    BaseArtifactService,
    Event,
    EventActions,
    InMemoryArtifactService,
    InMemoryMemoryService,
    InMemorySessionService,
    RedisSessionService,
    Runner,
)
from toolfleet.orchestrator.adk.local import tool_modules_of
from toolfleet.orchestrator.adk.sessions import SessionCreation
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.config import Settings
from toolfleet.shared.definition_imports import definitions_import
from toolfleet.shared.messages import ToolActions

CALL = types.Part(function_call=types.FunctionCall(id="c1", name="reimburse", args={}))
RESPONSE = types.Part(function_response=types.FunctionResponse(id="c1", name="reimburse"))


def event(*parts: types.Part, role: str = "model", **fields: object) -> Event:
    return Event(
        invocation_id="i", author="a", content=types.Content(role=role, parts=list(parts)), **fields
    )


def test_events_answer_adks_questions() -> None:
    calls = event(CALL)
    assert [c.id for c in calls.get_function_calls()] == ["c1"] and not calls.is_final_response()
    responses = event(RESPONSE, role="user")
    assert [r.id for r in responses.get_function_responses()] == ["c1"]
    assert not responses.is_final_response()
    assert event(types.Part(text="done")).is_final_response()
    assert event(CALL, long_running_tool_ids={"c1"}).is_final_response()
    skipped = event(RESPONSE, role="user", actions=ToolActions(skip_summarization=True))
    assert skipped.is_final_response()
    # Filled in by ADK's Runner as it yields, never stored.
    assert "long_running_tool_ids" not in event(CALL, long_running_tool_ids={"c1"}).model_dump()


def test_the_runner_takes_the_redis_services_and_refuses_others() -> None:
    service = RedisSessionService(Settings(redis_url="redis://127.0.0.1:1/0"))
    runner = Runner(
        agent=reimbursement.agent,
        app_name="expenses",
        session_service=service,
        artifact_service=InMemoryArtifactService(),
        memory_service=InMemoryMemoryService(),
    )
    assert runner.app_name == "expenses" and runner.agent is reimbursement.agent

    class InProcessArtifacts(BaseArtifactService):
        """Artifacts a worker cannot reach."""

    with pytest.raises(TypeError, match="pass RedisArtifactService"):
        Runner(
            agent=reimbursement.agent,
            app_name="expenses",
            session_service=service,
            artifact_service=InProcessArtifacts(),
        )
    with pytest.raises(TypeError, match="InMemorySessionService"):
        Runner(agent=reimbursement.agent, app_name="x", session_service=object())  # type: ignore[arg-type]


def test_the_workers_import_the_agents_modules_and_a_script_by_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert tool_modules_of(reimbursement.agent) == (["examples.reimbursement"], [])
    script = tmp_path / "my_agent.py"
    main = type(sys)("__main__")
    main.__file__ = str(script)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(reimbursement.reimburse, "__module__", "__main__")
    modules, paths = tool_modules_of(reimbursement.agent)
    assert "my_agent" in modules and paths == [str(tmp_path)]


def test_the_workers_import_the_built_in_tools_an_agent_runs_on_the_fleet() -> None:
    """An agent whose tools are all built-ins (load_memory; exit_loop, given as a plain
    function; preload_memory, which runs on the orchestrator): its workers must still
    register the ones that run on the fleet."""
    from toolfleet.adk import Agent, exit_loop, load_memory, preload_memory

    agent = Agent(name="memory_agent", tools=[load_memory, preload_memory, exit_loop])
    modules = ["toolfleet.shared.exit_loop", "toolfleet.shared.memory_tools"]
    assert tool_modules_of(agent) == (modules, [])


def test_module_level_client_code_does_nothing_while_its_module_is_imported_for_tools() -> None:
    """A worker importing an ADK script for its tools must not run the script's program
    (its module-level `call_agent(...)`): Runner.run and create_session do nothing then."""
    service = RedisSessionService(Settings(redis_url="redis://127.0.0.1:1/0"))  # never reached
    runner = Runner(agent=reimbursement.agent, app_name="expenses", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="hi")])
    with definitions_import("some_script"):
        assert list(runner.run(user_id="u", session_id="s", new_message=ask)) == []
        creation = service.create_session(app_name="expenses", user_id="u", session_id="s")
        assert creation.id == "s"
    assert service._unawaited == {}  # nothing left for a Runner to create later
    # Outside such an import, a sync create_session (older ADK) is made on first run.
    later = service.create_session(app_name="expenses", user_id="u")
    assert len(later.id) == 32 and list(service._unawaited) == [("expenses", "u", later.id)]


async def test_a_creation_is_made_once_however_often_it_is_awaited() -> None:
    made: list[str] = []

    async def make() -> Session:
        made.append("once")
        return Session(id="s", app_name="a", user_id="u")

    creation = SessionCreation(make, app_name="a", user_id="u", id="s")
    first, second = await creation, await creation
    assert first is second and made == ["once"]


def test_events_carry_their_state_writes_in_adks_actions() -> None:
    service = RedisSessionService(Settings(redis_url="redis://127.0.0.1:1/0"))
    runner = Runner(agent=reimbursement.agent, app_name="expenses", session_service=service)
    shaped = runner._shaped(event(RESPONSE, role="user", state_delta={"user:theme": "dark"}))
    assert isinstance(shaped.actions, EventActions)
    assert shaped.actions.state_delta == {"user:theme": "dark"}


def test_an_agent_tool_names_the_module_that_made_it_for_the_workers() -> None:
    summary = Agent(name="summary", instruction="Summarize.")
    root = Agent(name="root", tools=[AgentTool(agent=summary)])
    assert tool_modules_of(root) == ([__name__], [])


def test_default_in_memory_services_of_a_process_share_one_local_fleet() -> None:
    """The reference's examples make a service per query: each must not start a server
    and workers of its own. A service given settings has its own."""
    first, second = InMemorySessionService(), InMemorySessionService()
    assert first._fleet is second._fleet
    own = InMemorySessionService(Settings(redis_url="redis://127.0.0.1:1/0"))
    assert own._fleet is not first._fleet
