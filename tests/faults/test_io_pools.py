"""io pools on real workers: many calls per process, each with the guarantees of prefork.

Real redis-server, real `celery worker` processes on Celery's threads pool (`toolfleet
worker --pool io`), the orchestrator (a Runner) in this process with an offline scripted
model; tools in io_pool_tools. Concurrency is shown by the workers' own timestamps (every
start before every end), never by a wall-time threshold.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable

import pytest
import redis
from kombu.transport.redis import Channel

from tests.faults import probe
from tests.faults.conftest import fault_settings
from tests.faults.io_pool_tools import (
    OVERRUN_LIMIT_S,
    cancelled_key,
    effect_key,
    started_key,
)
from tests.faults.servers import RedisServer
from tests.faults.test_worker_faults import PATIENT_GRACE_S, Run, patient, running
from tests.support import until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.celery_config import recovery_bound_s
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.messages import CallStatus, ToolResult

pytestmark = pytest.mark.integration

Report = Callable[[str, object], None]
WIDE = {"max_parallel_calls": 256, "max_calls_per_turn": 256}  # one turn, one dispatch


def agent_of(*calls: Call) -> Agent:
    """An agent whose one turn makes `calls` at once, then answers."""
    tools = load_definitions(["tests.faults.io_pool_tools"]).tools.values()
    model = ScriptedModel([call(*calls), say("done")])
    return Agent(name="io_agent", tools=list(tools), model=model)


async def one_turn(settings: Settings, agent: Agent) -> list[ToolResult]:
    """Run the agent's turn to its end; each call's results (the invariant: one each)."""
    async with running(settings.model_copy(update=WIDE), agent, "go") as run:
        await run.finish()
    return [u.result for _, u in run.updates if isinstance(u, CallFinished)]


def overlap(results: list[ToolResult]) -> float:
    """Seconds during which every call was running at once (negative: never)."""
    return min(r.finished_at for r in results) - max(r.started_at for r in results)


async def test_200_async_calls_run_in_one_wave_on_one_io_process(
    settings: Settings, workers: WorkerGroup, report_figure: Report
) -> None:
    worker = workers.start(["io"])  # the settings' io concurrency
    assert worker.kind == "io" and worker.concurrency == settings.io_concurrency >= 200
    wave = uuid.uuid4().hex
    results = await one_turn(settings, agent_of(*[Call("io_meet", {"wave": wave, "n": 200})] * 200))

    assert len(results) == 200 and len({r.call_id for r in results}) == 200
    assert all(r.status is CallStatus.SUCCESS for r in results), _summary(results)
    assert {r.pid for r in results} == {results[0].pid}  # one worker process
    assert {r.worker for r in results} == {worker.hostname}
    # Every call started before any ended: all 200 were in flight at one instant.
    assert overlap(results) > 0, sorted((r.started_at, r.finished_at) for r in results)[:3]
    assert all(r.response == {"met": True} for r in results)
    report_figure("calls in flight at once, one process", 200)
    report_figure("first start -> last start", f"{_spread(results):.2f} s")


async def test_sync_tools_on_threads_run_concurrently(
    settings: Settings, workers: WorkerGroup, report_figure: Report
) -> None:
    worker = workers.start(["io"], concurrency=50)
    wave = uuid.uuid4().hex
    agent = agent_of(*[Call("io_meet_sync", {"wave": wave, "n": 50})] * 50)
    results = await one_turn(settings, agent)

    assert len(results) == 50 and all(r.status is CallStatus.SUCCESS for r in results)
    assert {r.pid for r in results} == {results[0].pid}
    assert overlap(results) > 0
    assert all(r.response["met"] is True for r in results)
    assert len({r.response["thread"] for r in results}) == 50  # a thread each
    report_figure("sync calls in flight at once, one process", 50)
    assert worker.alive()


async def test_sync_tools_run_on_at_most_io_threads_threads_the_rest_wait_for_one(
    redis_server: RedisServer,
) -> None:
    """A high io concurrency is for coroutine calls: sync tools' calls get io_threads
    threads, and those beyond wait in the process for one of them."""
    few = fault_settings(redis_server.url(), io_threads=2)
    with WorkerGroup(few) as group:
        worker = group.start(["io"])
        assert worker.concurrency == few.io_concurrency > 2
        wave = uuid.uuid4().hex
        results = await one_turn(few, agent_of(*[Call("io_meet_sync", {"wave": wave, "n": 2})] * 6))

    assert len(results) == 6 and all(r.status is CallStatus.SUCCESS for r in results)
    assert all(r.response["met"] is True for r in results), _summary(results)
    assert {r.pid for r in results} == {results[0].pid}
    assert len({r.response["thread"] for r in results}) == 2  # two threads ran all six


async def test_one_coroutine_timing_out_does_not_disturb_its_siblings(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, report_figure: Report
) -> None:
    workers.start(["io"])
    siblings = [Call("io_nap", {"seconds": 2.0})] * 5
    results = await one_turn(settings, agent_of(Call("io_overrun", {}), *siblings))

    by_tool = {r.tool: r for r in results}
    overrun = by_tool["io_overrun"]
    naps = [r for r in results if r.tool == "io_nap"]
    assert overrun.status is CallStatus.ERROR
    assert overrun.response == {
        "status": "error",
        "error_type": "TimeoutError",
        "error_message": f"tool 'io_overrun' exceeded its time limit of {OVERRUN_LIMIT_S:g} s",
    }
    took = overrun.finished_at - overrun.started_at
    assert OVERRUN_LIMIT_S <= took < OVERRUN_LIMIT_S + 0.6, took  # + the bounded cleanup
    # The tool and the task it started were cancelled when it timed out; no side effect.
    prefix = settings.key_prefix
    cancelled = client.lrange(cancelled_key(prefix, overrun.call_id), 0, -1)
    assert sorted(x.decode() for x in cancelled) == ["helper", "tool"]
    # Its siblings on the same loop ran to their end, after it was cancelled.
    assert len(naps) == 5 and all(r.status is CallStatus.SUCCESS for r in naps), naps
    assert {r.pid for r in naps} == {overrun.pid}
    assert all(r.finished_at - r.started_at >= 2.0 for r in naps)
    assert all(r.finished_at > overrun.finished_at for r in naps)
    assert client.lrange(effect_key(prefix, overrun.call_id), 0, -1) == []
    report_figure("timed-out call answered after", f"{took:.2f} s")


async def test_a_sync_tool_past_its_limit_is_answered_at_the_limit_on_threads(
    settings: Settings, workers: WorkerGroup
) -> None:
    workers.start(["io"])
    agent = agent_of(Call("io_overrun_sync", {"seconds": 2.5}), Call("io_nap", {"seconds": 0.1}))
    results = await one_turn(settings, agent)

    by_tool = {r.tool: r for r in results}
    late = by_tool["io_overrun_sync"]
    assert late.response["error_type"] == "TimeoutError", late.response
    assert OVERRUN_LIMIT_S <= late.finished_at - late.started_at < OVERRUN_LIMIT_S + 0.5
    assert by_tool["io_nap"].status is CallStatus.SUCCESS


async def test_io_worker_killed_with_100_calls_in_flight_each_is_redelivered_and_answered_once(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Report,
) -> None:
    tools = list(load_definitions(settings.tool_modules).tools.values())
    bound = recovery_bound_s(settings, tools)
    victim = workers.start(["io"], name="io-victim")
    agent = agent_of(*[Call("io_hang_once", {})] * 100)
    started = started_key(settings.key_prefix, "io_hang_once")
    orchestrator = patient(settings, bound + PATIENT_GRACE_S).model_copy(update=WIDE)
    async with running(orchestrator, agent, "go") as run:
        await until(lambda: client.llen(started) >= 100, "100 calls to start", 15)
        # A worker killed holding kombu's restore mutex would stall the sweep for 10 s.
        await until(lambda: not client.exists(Channel.unacked_mutex_key), "the sweep mutex", 5)
        victim.kill()  # SIGKILL: the main process and its 100 threads, mid-call
        killed_at = time.time()
        first = [json.loads(e) for e in client.lrange(started, 0, -1)]
        assert {e["execution"] for e in first} == {1} and len(first) == 100
        # Its sweep redelivers them; started off the loop, where the orchestrator runs.
        survivor = await asyncio.to_thread(workers.start, ["io"], None, "io-survivor")
        await run.finish()
        call_ids = [e["call_id"] for e in first]
        await assert_run_again_once(run, client, settings.key_prefix, call_ids, survivor)
    last = max(u.result.finished_at for _, u in run.updates if isinstance(u, CallFinished))
    report_figure("calls redelivered, each answered once", len(call_ids))
    report_figure("kill -> last response", f"{last - killed_at:.2f} s (bound {bound:g} s)")


async def assert_run_again_once(
    run: Run, client: redis.Redis, prefix: str, call_ids: list[str], survivor: WorkerProcess
) -> None:
    """Each call of `call_ids`, taken by a worker that was killed, ran again on `survivor`
    (its second execution) and reached the loop, the session and the model once."""
    for call_id in call_ids:
        ((_, result),) = run.finished(call_id)  # exactly one result reached the loop
        assert result.status is CallStatus.SUCCESS, result
        assert result.worker == survivor.hostname
        assert result.response == {"execution": 2}
        assert await run.responses(call_id) == [result.response]  # one response stored
        assert run.model_saw(call_id) == [result.response]
    assert all(probe.executions(client, prefix, c) == 2 for c in call_ids)


def _spread(results: list[ToolResult]) -> float:
    return max(r.started_at for r in results) - min(r.started_at for r in results)


def _summary(results: list[ToolResult]) -> str:
    """How many results of each status and response: what went wrong, in one line."""
    counts: dict[str, int] = {}
    for r in results:
        key = f"{r.status.value} {r.response} {r.worker}"[:160]
        counts[key] = counts.get(key, 0) + 1
    return str(counts)
