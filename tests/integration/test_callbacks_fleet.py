"""Tool callbacks, the retry plugin and dedupe with the calls on real worker processes:
executions are counted by the tool itself (a file per counter), never assumed."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration import fleet_tools
from tests.support import answers, assert_one_response_per_call
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, call, say
from toolfleet.orchestrator.plugins import BasePlugin, ReflectAndRetryToolPlugin
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import session_key
from toolfleet.shared.tools import FunctionTool

pytestmark = pytest.mark.integration

TOOLS = tools_in_module(fleet_tools)


async def run_script(
    settings: Settings, *steps: Step, plugins: tuple[BasePlugin, ...] = (), **callbacks: Any
) -> Session:
    agent = Agent(name="cb_agent", tools=TOOLS, model=ScriptedModel(list(steps)), **callbacks)
    async with Runner(agent, settings, plugins=plugins) as runner:
        session_id = uuid.uuid4().hex
        async for _ in runner.run(user_id="u1", session_id=session_id, message="go"):
            pass
        return await runner.store.get(session_key("cb_agent", "u1", session_id))


async def test_a_short_circuit_never_reaches_a_worker(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    blocked, allowed = tmp_path / "blocked", tmp_path / "allowed"

    def guard(tool: FunctionTool, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return {"result": "not run"} if args["counter_file"] == str(blocked) else None

    session = await run_script(
        settings,
        call(
            Call("flaky", {"counter_file": str(blocked), "failures": 0}),
            Call("flaky", {"counter_file": str(allowed), "failures": 0}),
        ),
        say("done"),
        before_tool_callback=guard,
    )
    assert [r for _, r in answers(session)] == [{"result": "not run"}, {"runs": 1}]
    assert not blocked.exists()  # zero executions on any worker
    assert allowed.read_text() == "1"
    assert_one_response_per_call(session)


async def test_dedupe_runs_one_of_identical_calls_on_the_fleet(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    same = Call("flaky", {"counter_file": str(counter), "failures": 0})
    deduped = settings.model_copy(update={"dedupe_tool_calls": True})
    session = await run_script(deduped, call(same, same, same), say("done"))
    assert [r for _, r in answers(session)] == [{"runs": 1}] * 3
    assert counter.read_text() == "1"
    assert_one_response_per_call(session)


async def test_retry_plugin_on_real_errors_then_the_error_stands(
    settings: Settings, fleet: WorkerGroup
) -> None:
    failing = call(Call("fail", {"message": "disk full"}))
    session = await run_script(
        settings,
        failing,
        failing,
        say("gave up"),
        plugins=(ReflectAndRetryToolPlugin(max_retries=1),),
    )
    first, second = (r for _, r in answers(session))
    assert first["retry_count"] == 1 and first["error_message"] == "disk full"
    assert second == {"status": "error", "error_type": "ValueError", "error_message": "disk full"}
    assert_one_response_per_call(session)
