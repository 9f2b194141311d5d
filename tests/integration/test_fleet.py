"""End to end: the loop on real worker processes over a real Redis."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from google.genai import types

from tests.integration import fleet_tools, heavy_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module

pytestmark = pytest.mark.integration

TOOLS = [*tools_in_module(fleet_tools), *tools_in_module(heavy_tools)]


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


async def test_a_large_state_reaches_each_call_of_a_turn_from_one_stored_snapshot(
    settings: Settings, fleet: WorkerGroup
) -> None:
    session = uuid.uuid4().hex
    doc = "z" * 20_000  # over what travels in each message
    await run_script(
        settings, "remember", call(Call("remember", {"key": "doc", "value": doc})), say("ok"),
        session=session,
    )  # fmt: skip
    updates = await run_script(
        settings, "recall", call(*(Call("recall", {"key": "doc"}) for _ in range(6))), say("ok"),
        session=session,
    )  # fmt: skip
    assert [p.response for p in response_parts(updates)] == [{"value": doc}] * 6
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        pattern = f"{settings.key_prefix}:statesnap:*"
        snapshots = [k for k in client.scan_iter(pattern) if session in k.decode()]
        assert len(snapshots) == 1  # the turn's six calls named one
        assert client.ttl(snapshots[0]) > 0
    finally:
        client.close()


async def test_transient_exception_is_retried_with_backoff_then_succeeds(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    counter = str(tmp_path / "runs")
    updates = await run_script(
        settings, "flaky", call(Call("flaky", {"counter_file": counter, "failures": 2})), say("ok")
    )
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.response == {"runs": 3}
    assert result.attempt == 3


async def test_retries_are_bounded_and_the_last_error_reaches_the_model(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    updates = await run_script(
        settings,
        "flaky",
        call(Call("flaky", {"counter_file": str(counter), "failures": 99})),
        say("ok"),
    )
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.response["error_type"] == "ConnectionError"
    assert result.attempt == 4 and counter.read_text() == "4"  # first run + max_retries=3


async def test_parallel_turn_answers_at_once_when_no_worker_serves_a_pool(
    settings: Settings, fleet: WorkerGroup
) -> None:
    heavy = fleet.start(["heavy"], concurrency=1, name="heavy1")
    script = [
        call(Call("render_report", {"pages": 3}), Call("nap", {"seconds": 0.5, "label": "x"})),
        say("done"),
    ]
    served = await run_script(settings, "report", *script)
    assert response_parts(served)[0].response == {"pages": 3}, heavy.log()[-3000:]

    heavy.stop()  # a warm shutdown removes its heartbeat
    updates = await run_script(settings, "report", *script)

    unserved, napped = response_parts(updates)
    assert unserved.response == {
        "status": "error",
        "error_type": "NoWorkerError",
        "error_message": (
            "no worker serves pool heavy: tool 'render_report' is unavailable right now"
        ),
    }
    assert napped.response == {"slept": 0.5, "label": "x"}
    results = {u.result.tool: u.result for u in updates if isinstance(u, CallFinished)}
    assert results["render_report"].worker == "orchestrator"  # answered without dispatch
    # Answered before the 0.5 s nap ended: no waiting for a deadline.
    assert results["render_report"].finished_at < results["nap"].finished_at


async def test_lone_surrogates_of_a_user_and_a_model_are_replaced_and_the_turn_runs(
    settings: Settings, fleet: WorkerGroup
) -> None:
    """Text UTF-8 cannot carry (bytes decoded with errors='surrogateescape' hold it) in
    the user's message and the model's call and answer: U+FFFD in its place, stored, sent
    to a worker and answered."""
    escaped = b"caf\xe9".decode("utf-8", "surrogateescape")
    updates = await run_script(
        settings,
        f"shout {escaped}",
        call(Call("shout", {"text": escaped})),
        say("done \ud800"),
    )
    (response,) = response_parts(updates)
    assert response.response == {"shouted": "CAF\ufffd"}
    texts = [
        part.text
        for u in updates
        if isinstance(u, Event) and u.content is not None
        for part in u.content.parts or ()
        if part.text
    ]
    assert texts == ["shout caf\ufffd", "done \ufffd"]
