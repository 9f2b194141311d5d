"""Flower on the real fleet: tool tasks listed with their arguments, secrets redacted.

Flower knows only the tasks whose events it receives while it runs, so it starts first
and the turn runs once its event receiver hears the fleet's workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.flower import Flower, Response, running_flower
from tests.integration import fleet_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module

pytestmark = pytest.mark.integration

USER, PASSWORD = "user", "pw"
START_TIMEOUT_S = 20.0
EVENTS_TIMEOUT_S = 20.0


def until(probe: Any, timeout_s: float, what: str) -> Any:
    """Poll `probe()` until it returns something truthy; return that."""
    found: list[Any] = []

    def check() -> bool:
        value = probe()
        if value:
            found.append(value)
        return bool(value)

    wait_for(check, timeout_s, what, interval_s=0.1)
    return found[0]


@pytest.fixture(scope="module")
def flower(
    settings: Settings, fleet: WorkerGroup, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flower]:
    hostnames = [w.hostname for w in fleet.workers if {"default", "io"} & set(w.pools)]
    log_dir = tmp_path_factory.mktemp("flower")
    with running_flower(settings, hostnames, log_dir, (USER, PASSWORD), START_TIMEOUT_S) as f:
        yield f


def test_api_refuses_requests_without_the_credentials(flower: Flower) -> None:
    assert flower.get("/api/tasks", credentials=None).status == 401
    assert flower.get("/api/tasks", credentials=(USER, "wrong")).status == 401
    assert flower.get("/api/tasks").status == 200


async def test_tool_tasks_are_listed_with_their_arguments_and_secrets_redacted(
    settings: Settings, fleet: WorkerGroup, flower: Flower
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    label = f"flower-{uuid.uuid4().hex[:8]}"
    endpoint = f"/v1/{label}"
    script = [
        call(
            Call("nap", {"seconds": 0.2, "label": f"{label}-a"}),
            Call("nap", {"seconds": 0.2, "label": f"{label}-b"}),
            Call("call_api", {"endpoint": endpoint, "api_key": canary}),
            Call("shout", {"text": f"{label}-io"}),  # taken by the io worker's intake
        ),
        say("done"),
    ]
    agent = Agent(
        name="flower_agent",
        tools=tools_in_module(fleet_tools),
        model=ScriptedModel(script),  # type: ignore[arg-type]
    )
    async with Runner(agent, settings) as runner:
        updates = [
            u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
        ]
    results = {u.result.tool: u.result for u in updates if isinstance(u, CallFinished)}
    # The tool got the real key; only what is shown of the task is redacted.
    assert results["call_api"].response == {"endpoint": endpoint, "key_length": len(canary)}

    def ours(tasks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        return [t for t in tasks.values() if label in str(t.get("args"))]

    def all_succeeded() -> Response | None:
        # SUCCESS comes with the last event of a task, so runtime and worker are in.
        response = flower.get("/api/tasks")
        assert response.status == 200, response.text
        mine = ours(response.json())
        done = len(mine) == 4 and all(t["state"] == "SUCCESS" for t in mine)
        return response if done else None

    response = until(all_succeeded, EVENTS_TIMEOUT_S, "flower to list the 4 tasks as SUCCESS")
    mine = ours(response.json())
    naps = [t for t in mine if t["name"] == "tool.nap"]
    (api_call,) = [t for t in mine if t["name"] == "tool.call_api"]
    (shout,) = [t for t in mine if t["name"] == "tool.shout"]
    assert len(naps) == 2
    default_workers = {w.hostname for w in fleet.workers if "default" in w.pools}
    io_workers = {w.hostname for w in fleet.workers if "io" in w.pools}
    assert shout["worker"] in io_workers, shout
    for task in mine:
        assert task["runtime"] > 0, task
        assert task["worker"] in default_workers | io_workers, task
        # kwargs shows where the call belongs, never the session state snapshot.
        assert "call_id" in task["kwargs"] and "state" not in task["kwargs"], task
    assert {"'seconds': 0.2" in t["args"] for t in naps} == {True}, naps
    assert f"'endpoint': '{endpoint}'" in api_call["args"], api_call
    assert "'api_key': '***'" in api_call["args"], api_call
    assert canary not in response.text
    assert canary not in flower.log()
    for worker in fleet.workers:
        assert canary not in worker.log(), worker.hostname
