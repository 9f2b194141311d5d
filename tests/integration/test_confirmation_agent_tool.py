"""An AgentTool's child agent runs its own loop on a worker: a call of its that needs a
person's confirmation waits there, as in any session, and does not run before it is
confirmed. Real Redis, real `celery worker` processes (the child on the agents pool);
the tool counts its runs in a file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from tests.integration import confirm_agent
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

pytestmark = pytest.mark.integration


async def test_an_agent_tools_child_does_not_run_a_call_before_it_is_confirmed(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    model = ScriptedModel(
        [call(Call(confirm_agent.payer.name, {"request": str(transfers)})), say("done")]
    )
    parent = Agent(name="delegating", tools=[confirm_agent.payer_tool], model=model)
    session_id = uuid.uuid4().hex

    async with Orchestrator([parent], settings, models={parent.name: model}) as orch:
        await orch.runner(parent.name).ask(user_id="u1", session_id=session_id, message="pay")

    client = redis.Redis.from_url(settings.require_redis_url())
    pending = Completions(client, Keys(settings.key_prefix)).pending()
    client.close()
    children = [p for p in pending if p.session_id.startswith(f"{session_id}.")]
    assert [(p.kind, p.tool, p.agent) for p in children] == [
        ("confirmation", "transfer_money", confirm_agent.payer.name)
    ]
    assert not transfers.exists()  # waits for a person, in the child's session
