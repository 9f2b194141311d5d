"""Fleet-wide per-tool limits on real processes: a real redis-server, two `celery worker`
processes (one SIGKILLed mid-call), the orchestrator (a Runner) in this process with an
offline scripted model; tools in limit_tools record from inside when they ran."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.conftest import fault_settings
from tests.faults.limit_tools import (
    OVERRUN_S,
    RATE_COUNT,
    RATE_PERIOD_S,
    SLOTS,
    TOOLS,
    runs_key,
    started_key,
)
from tests.faults.servers import RedisServer
from tests.faults.test_worker_faults import patient, running
from tests.support import until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.celery_config import recovery_bound_s
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus
from toolfleet.workers.app import SLOT_LEASE_BEATS

pytestmark = pytest.mark.integration

# Calls sent once a worker was killed: one at a time through the one live slot, they
# outlast the dead one's lease (10 x 0.4 s against 2.5 s), so both slots are used again.
OTHERS = 10
START_TIMEOUT_S = 15.0
# Timer lateness and a loaded machine, beyond the lease itself.
LEASE_SLACK_S = 1.5
# A start is admitted on Redis's clock; the tool reads the host's a hop later (a helper
# thread, then the call loop), later by a varying few tens of ms on a loaded machine.
# Without the limit the spans are about 0.01 s.
RATE_SLACK_S = 0.25


@pytest.fixture
def settings(redis_server: RedisServer) -> Settings:
    return fault_settings(redis_server.url(), tool_modules=["tests.faults.limit_tools"])


def limits_agent(*calls: Call) -> Agent:
    model = ScriptedModel(by_message={"": [call(*calls), say("done")]})
    return Agent(name="limits_agent", tools=TOOLS, model=model)


def entries(client: redis.Redis, prefix: str, tool_name: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in client.lrange(runs_key(prefix, tool_name), 0, -1)]


def most_at_once(intervals: list[tuple[float, float]], after: float = 0.0) -> tuple[int, float]:
    """The most intervals open at one moment after `after`, and the first moment they were."""
    # At a tie an end comes first: that slot was given back before the next start.
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now, most, first = 0, 0, 0.0
    for at, step in points:
        now += step
        if at > after and now > most:
            most, first = now, at
    return most, first


async def test_never_more_than_max_concurrency_across_workers_while_one_is_killed(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    bound = recovery_bound_s(settings, TOOLS)
    lease_s = SLOT_LEASE_BEATS * settings.worker_heartbeat_s
    # Two workers of more processes than slots: the survivor alone could run four at once.
    workers.start_all([WorkerSpec(["default"], 4, "la"), WorkerSpec(["default"], 4, "lb")])
    aclient = aioredis.Redis.from_url(settings.require_redis_url())
    prefix = settings.key_prefix
    orchestrator = patient(settings, bound + 15)
    hang = limits_agent(Call("lim_slot", {"name": "hang"}))
    others = limits_agent(*[Call("lim_slot", {"name": f"c{i}"}) for i in range(OTHERS)])
    async with running(orchestrator, hang, "go") as first:
        popped = await aclient.blpop([started_key(prefix, "lim_slot")], START_TIMEOUT_S)
        assert popped is not None, "the hanging call did not start"
        victim_start = json.loads(popped[1])
        (victim,) = [w for w in workers.workers if w.process.pid == victim_start["ppid"]]
        victim.kill()  # SIGKILL to its whole process group: main process and pool
        killed_at = time.time()
        # Sent now: one slot is free, the other held by the dead worker until its lease ends.
        async with running(orchestrator, others, "go") as second:
            await second.finish()
        await first.finish()
    await aclient.aclose()

    updates = [*first.updates, *second.updates]
    results = [u.result for _, u in updates if isinstance(u, CallFinished)]
    assert len(results) == OTHERS + 1
    assert all(r.status is CallStatus.SUCCESS for r in results), [r.response for r in results]
    recorded = entries(client, prefix, "lim_slot")
    ends = {(e["call_id"], e["execution"]): e["end"] for e in recorded if "end" in e}
    intervals = []
    for entry in recorded:
        if "end" in entry:
            continue
        # An execution that never ended was killed: it ran until the kill.
        end = ends.get((entry["call_id"], entry["execution"]), killed_at)
        intervals.append((entry["start"], end))
    most, _ = most_at_once(intervals)
    assert most == SLOTS, intervals  # the limit was reached, never passed
    # The dead worker's slots came back within their lease: two ran at once again.
    again, at = most_at_once(intervals, after=killed_at)
    assert again == SLOTS, intervals
    assert at - killed_at <= lease_s + LEASE_SLACK_S, (at - killed_at, lease_s)
    report_figure(
        "kill -> both slots in use again", f"{at - killed_at:.2f} s (lease {lease_s:g} s)"
    )
    assert not client.zcard(Keys(prefix).tool_slots("lim_slot"))  # every slot given back


async def test_a_rate_limited_io_tool_never_starts_faster_than_its_rate(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    io = settings.default_io_pool
    workers.start_all([WorkerSpec([io], None, "ra"), WorkerSpec([io], None, "rb")])
    n = RATE_COUNT * 3
    agent = limits_agent(*[Call("lim_rate", {"n": i}) for i in range(n)])
    async with running(patient(settings, 15), agent, "go") as run:
        await run.finish()
    results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    assert sorted(r.response.get("n", -1) for r in results) == list(range(n)), results
    starts = sorted(e["start"] for e in entries(client, settings.key_prefix, "lim_rate"))
    assert len(starts) == n
    # Any RATE_COUNT + 1 starts in a row span at least the period.
    spans = [starts[i + RATE_COUNT] - starts[i] for i in range(n - RATE_COUNT)]
    assert min(spans) >= RATE_PERIOD_S - RATE_SLACK_S, spans


async def test_an_io_tool_never_runs_more_than_max_concurrency_across_workers(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    io = settings.default_io_pool
    workers.start_all([WorkerSpec([io], None, "ia"), WorkerSpec([io], None, "ib")])
    n = 8  # each io worker would take them all at once
    agent = limits_agent(*[Call("lim_slot_io", {"n": i}) for i in range(n)])
    async with running(patient(settings, 15), agent, "go") as run:
        await run.finish()
    results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    assert sorted(r.response.get("n", -1) for r in results) == list(range(n)), results
    recorded = entries(client, settings.key_prefix, "lim_slot_io")
    assert len(recorded) == n
    most, _ = most_at_once([(e["start"], e["end"]) for e in recorded])
    assert most == SLOTS, recorded
    assert not client.zcard(Keys(settings.key_prefix).tool_slots("lim_slot_io"))


async def test_a_sync_io_tool_past_its_time_limit_holds_its_slot_until_its_thread_ends(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    """A call is answered TimeoutError at its limit while its thread runs on (Python
    cannot stop one), holding the slot: a call sent right after it waits for that thread
    instead of starting, and is answered TimeoutError when its own limit passes (the wait
    counts), never started."""
    workers.start_all([WorkerSpec([settings.default_io_pool], None, "ia")])
    results = []
    for n in range(2):  # the second turn's call comes while the first's thread runs
        agent = limits_agent(Call("lim_overrun", {"n": n}))
        async with running(patient(settings, 15), agent, "go") as run:
            await run.finish()
        results += [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    assert [r.response["error_type"] for r in results] == ["TimeoutError"] * 2, results
    await until(
        lambda: len(entries(client, settings.key_prefix, "lim_overrun")) == 1,
        "the abandoned run to end",
        START_TIMEOUT_S + OVERRUN_S,
    )
    started = client.lrange(started_key(settings.key_prefix, "lim_overrun"), 0, -1)
    assert [json.loads(s)["n"] for s in started] == [0]
    await until(
        lambda: not client.zcard(Keys(settings.key_prefix).tool_slots("lim_overrun")),
        "the last slot to be given back",
        5,
    )
