"""End to end: the loop on real worker processes over a real Redis."""

from __future__ import annotations

import uuid

import pytest
from google.genai import types

from orchestrator.agent import Agent
from orchestrator.loop import CallFinished, Update
from orchestrator.offline import Call, ScriptedModel, call, say
from orchestrator.local_workers import WorkerGroup
from orchestrator.runner import Runner
from orchestrator.sessions import Event
from shared.config import Settings
from tests.integration import fleet_tools

pytestmark = pytest.mark.integration

TOOLS = [
    fleet_tools.nap,
    fleet_tools.fail,
    fleet_tools.overrun,
    fleet_tools.remember,
    fleet_tools.recall,
]


async def run_script(
    settings: Settings, message: str, *steps: object, session: str | None = None
) -> list[Update]:
    agent = Agent(name="it_agent", tools=TOOLS, model=ScriptedModel(list(steps)))  # type: ignore[arg-type]
    async with Runner(agent, settings) as runner:
        return [
            u
            async for u in runner.run(
                user_id="u1", session_id=session or uuid.uuid4().hex, message=message
            )
        ]


def response_parts(updates: list[Update]) -> list[types.FunctionResponse]:
    (event,) = [u for u in updates if isinstance(u, Event) and u.calls][:1]
    assert event.content is not None
    return [p.function_response for p in event.content.parts or () if p.function_response]


async def test_parallel_turn_runs_on_several_worker_processes_with_overlapping_execution(
    settings: Settings, fleet: WorkerGroup
) -> None:
    updates = await run_script(
        settings,
        "nap four times",
        call(*(Call("nap", {"seconds": 0.5, "label": f"n{i}"}) for i in range(4))),
        say("rested"),
    )
    results = [u.result for u in updates if isinstance(u, CallFinished)]
    assert len(results) == 4 and all(r.status == "success" for r in results)
    processes = {(r.worker, r.pid) for r in results}
    assert len(processes) > 1, processes
    assert len({r.worker for r in results}) == 2  # both worker hosts served the turn
    # Overlapping intervals from the results' own timestamps: all 4 ran at once.
    assert max(r.started_at for r in results) < min(r.finished_at for r in results)
    labels = [p.response["label"] for p in response_parts(updates) if p.response]
    assert labels == ["n0", "n1", "n2", "n3"]  # call order, whatever the arrival order


async def test_parallel_turn_with_exception_and_timeout_still_returns_the_others(
    settings: Settings, fleet: WorkerGroup
) -> None:
    updates = await run_script(
        settings,
        "mixed",
        call(
            Call("fail", {"message": "disk full"}),
            Call("overrun", {"seconds": 5}),
            Call("nap", {"seconds": 0.1, "label": "ok"}),
        ),
        say("done"),
    )
    failed, timed_out, ok = (p.response or {} for p in response_parts(updates))
    assert failed == {"status": "error", "error_type": "ValueError", "error_message": "disk full"}
    assert timed_out["error_type"] == "TimeoutError"
    assert "time limit of 1 s" in timed_out["error_message"]
    assert ok == {"slept": 0.1, "label": "ok"}


async def test_state_written_on_one_worker_is_read_on_another_in_the_next_turn(
    settings: Settings, fleet: WorkerGroup
) -> None:
    session = uuid.uuid4().hex
    await run_script(
        settings, "remember", call(Call("remember", {"key": "city", "value": "Oslo"})), say("ok"),
        session=session,
    )  # fmt: skip
    updates = await run_script(
        settings, "recall", call(Call("recall", {"key": "city"})), say("ok"), session=session
    )
    (recalled,) = response_parts(updates)
    assert recalled.response == {"value": "Oslo"}
    (finished,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert finished.worker.startswith("w3@")  # the `other` pool's worker process
