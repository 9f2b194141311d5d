"""RunConfig(max_llm_calls=2) over an AgentTool whose agent would ask its model three
times, on real workers (the child on the agents pool), against google-adk's own outcome.

ADK's AgentTool.run_async runs the wrapped agent with the caller's run_config, and its
InvocationContext.increment_llm_call_count counts each invocation's calls apart: the
child's third model call raises LlmCallsLimitExceededError. No on_tool_error callback
answers it, so it is raised on out of the caller's run: the caller's model is asked once.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from tests.adk_venv import BUILD_TIMEOUT_S, REPO_ROOT
from tests.integration import adk_tools
from tests.integration.adk_web_servers import server_env
from toolfleet.adk import (
    Event,
    LlmAgent,
    LlmCallsLimitExceededError,
    RedisSessionService,
    RunConfig,
    Runner,
)
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

REFERENCE = Path(__file__).parent / "adk_nested_limit_reference.py"
CHILD = adk_tools.limited_counter.name
# What google-adk 2.13 gives (adk_nested_limit_reference.py prints it): the error, the
# model calls of each agent (the child's counted apart from the caller's), and the
# caller's events with content (its call of the agent tool).
EXPECTED: dict[str, Any] = {
    "raised": "LlmCallsLimitExceededError: Max number of llm calls limit of `2` exceeded",
    "model_calls": {"adk_limited_asking": 1, CHILD: 2},
    "turns": [["adk_limited_asking", CHILD]],
}


def turns(events: list[Event]) -> list[list[str]]:
    return [
        [e.author, *(c.name or "" for c in e.get_function_calls())] for e in events if e.content
    ]


async def test_an_agent_tools_run_obeys_the_callers_max_llm_calls_as_adks(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    model = ScriptedModel([call(Call(CHILD, {"request": "count"})), say("unreached")])
    asking = LlmAgent(
        name="adk_limited_asking", model=model, tools=[adk_tools.limited_counter_tool]
    )
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="limits", user_id="u1")
    runner = Runner(agent=asking, app_name="limits", session_service=service)
    events: list[Event] = []
    with pytest.raises(LlmCallsLimitExceededError) as raised:
        async for event in runner.run_async(
            user_id="u1",
            session_id=session.id,
            new_message=types.UserContent("Count my words"),
            run_config=RunConfig(max_llm_calls=2),
        ):
            events.append(event)

    (agent_call,) = events[0].get_function_calls()
    child = await service.get_session(
        app_name="limits", user_id="u1", session_id=f"{session.id}.{agent_call.id}"
    )
    assert child is not None
    child_turns = [e for e in child.events if e.author == CHILD and e.get_function_calls()]
    outcome = {
        "raised": f"{type(raised.value).__name__}: {raised.value}",
        "model_calls": {"adk_limited_asking": len(model.requests), CHILD: len(child_turns)},
        "turns": turns(events),
    }
    assert outcome == EXPECTED
    # The caller's session owes nothing: its call has the child's error as its response.
    stored = await service.get_session(app_name="limits", user_id="u1", session_id=session.id)
    assert stored is not None
    (response,) = stored.events[-1].get_function_responses()
    assert response.response is not None
    assert response.response["error_type"] == "LlmCallsLimitExceededError"
    await runner.close()


@pytest.mark.timeout(BUILD_TIMEOUT_S + 120)  # the first to ask for `adk_python` builds it
def test_google_adk_gives_the_same_outcome(adk_python: Path) -> None:
    done = subprocess.run(
        [str(adk_python), str(REFERENCE)],
        cwd=REPO_ROOT,
        env=server_env({}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == EXPECTED
