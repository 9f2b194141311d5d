"""ADK's workflow agents on real workers: a SequentialAgent whose first step is a
ParallelAgent, run by toolfleet.adk's Runner as an ADK program runs it."""

from __future__ import annotations

import pytest
from google.genai import types

from tests.integration.fleet_tools import nap
from toolfleet.adk import Agent, ParallelAgent, RedisSessionService, Runner, SequentialAgent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

NAP_S = 1.5


def researcher(name: str) -> Agent:
    return Agent(
        name=name,
        instruction=f"research {name}",
        tools=[nap],
        model=ScriptedModel(
            [
                call(Call("nap", {"seconds": NAP_S, "label": name})),
                lambda v: say(f"{name}: {v.response('nap')['label']} done"),
            ]
        ),
        output_key=name,
    )


async def test_a_sequence_of_a_parallel_runs_its_branches_at_once_on_the_workers(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    summary_model = ScriptedModel(
        [lambda v: say("summary of both")],
    )
    summary = Agent(name="summary", instruction="sum up {north} and {south}", model=summary_model)
    root = SequentialAgent(
        name="pipeline",
        sub_agents=[
            ParallelAgent(name="research", sub_agents=[researcher("north"), researcher("south")]),
            summary,
        ],
    )
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="workflows", user_id="u1")
    runner = Runner(agent=root, app_name="workflows", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="research both")])

    events = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]

    stored = await service.get_session(app_name="workflows", user_id="u1", session_id=session.id)
    assert stored is not None
    records = [r for e in stored.events for r in e.calls]
    assert sorted(r.tool for r in records) == ["nap", "nap"]
    # Both ran on the fleet, and at the same time: each started before the other ended.
    first, second = records
    assert first.worker and second.worker and first.worker != "orchestrator"
    assert first.started_at < second.finished_at and second.started_at < first.finished_at
    # ADK's branches, on the events yielded and on those stored.
    for seen in (events, stored.events):
        branches = {e.author: e.branch for e in seen if e.author in ("north", "south")}
        assert branches == {"north": "research.north", "south": "research.south"}
    assert {e.branch for e in stored.events if e.author in ("user", "summary")} == {None}
    # The step after the ParallelAgent saw both branches' answers and state.
    assert stored.state["north"] == "north: north done"
    assert stored.state["south"] == "south: south done"
    request = summary_model.requests[0]
    assert "sum up north: north done and south: south done" in request.instruction
    assert {"north", "south"} <= set(request.authors)
    final = [e for e in events if e.content is not None][-1]
    assert final.author == "summary" and final.is_final_response() and final.content
    assert "".join(p.text or "" for p in final.content.parts or ()) == "summary of both"
    # The call is over: the session owes the model nothing.
    keys = Keys(settings.key_prefix)
    owed = await _owed(settings, keys)
    assert session_key("workflows", "u1", session.id) not in owed


async def _owed(settings: Settings, keys: Keys) -> set[str]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(settings.require_redis_url())
    try:
        return {bytes(m).decode() for m in await client.smembers(keys.resume())}
    finally:
        await client.aclose()
