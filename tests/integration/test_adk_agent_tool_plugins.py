"""An AgentTool's agent runs, on a worker of the agents pool, with its App's plugins (ADK's
nested run is given its parent runner's plugins, `include_plugins=True` by default), or
without them when the AgentTool says `include_plugins=False`. The App is defined at the
top of a module the workers import (tests.integration.adk_tools), so each worker has it;
its plugin answers the child agent's model call before the child's own model does."""

from __future__ import annotations

import pytest
from google.genai import types

from tests.integration import adk_tools
from toolfleet.adk import App, RedisSessionService, Runner
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration


async def final_text(settings: Settings, app: App) -> str:
    service = RedisSessionService(settings)
    session = await service.create_session(app_name=app.name, user_id="u1")
    runner = Runner(app=app, session_service=service)
    texts = [
        part.text
        async for event in runner.run_async(
            user_id="u1", session_id=session.id, new_message=types.UserContent("Ask the child")
        )
        if event.is_final_response() and event.content
        for part in event.content.parts or []
        if part.text
    ]
    await runner.close()
    return texts[-1]


@pytest.mark.parametrize(
    ("app", "answer"),
    [
        (adk_tools.plugged_app, "child: from the app's plugin"),
        (adk_tools.unplugged_app, "child: from the child's model"),
    ],
)
async def test_an_agent_tools_run_has_its_apps_plugins_unless_it_says_not_to(
    settings: Settings, fleet: WorkerGroup, app: App, answer: str
) -> None:
    assert await final_text(settings, app) == answer
