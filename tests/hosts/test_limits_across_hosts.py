"""Fleet-wide per-tool limits with workers on two hosts (`w1`, `w2`, Redis on `r`; the
orchestrator is this process, a Runner): measured from inside the tools (limit_tools),
a `max_concurrency` is never passed and a `rate_limit` never exceeded while one host's
worker is SIGKILLed mid-run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from tests.faults.conftest import fault_settings
from tests.faults.limit_tools import RATE_COUNT, RATE_PERIOD_S, SLOTS, TOOLS, started_key
from tests.faults.test_tool_limits import (
    LEASE_SLACK_S,
    OTHERS,
    RATE_SLACK_S,
    START_TIMEOUT_S,
    entries,
    limits_agent,
    most_at_once,
)
from tests.faults.test_worker_faults import patient, running
from tests.hosts.fleet import HostFleet
from tests.hosts.netns import Network
from tests.support import until
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call
from toolfleet.shared.celery_config import recovery_bound_s
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus
from toolfleet.workers.app import SLOT_LEASE_BEATS

pytestmark = pytest.mark.integration

Record = Callable[[str, object], None]


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return fault_settings(redis_url, tool_modules=["tests.faults.limit_tools"])


def report(record_property: Record, name: str, seconds: float) -> None:
    print(f"{name}: {seconds:.2f} s")
    record_property(name, f"{seconds:.2f}")


async def test_max_concurrency_holds_across_hosts_while_one_hosts_worker_is_killed(
    network: Network, fleet: HostFleet, settings: Settings, record_property: Record
) -> None:
    w1, w2 = network.hosts["w1"], network.hosts["w2"]
    bound = recovery_bound_s(settings, TOOLS)
    lease_s = SLOT_LEASE_BEATS * settings.worker_heartbeat_s
    # More processes than slots on each host: either alone could run four at once.
    workers = fleet.start_workers([w1, w2], ["default"], concurrency=4)
    aclient = aioredis.Redis.from_url(settings.require_redis_url())
    prefix = settings.key_prefix
    orchestrator = patient(settings, bound + 15)
    hang = limits_agent(Call("lim_slot", {"name": "hang"}))
    others = limits_agent(*[Call("lim_slot", {"name": f"c{i}"}) for i in range(OTHERS)])
    async with running(orchestrator, hang, "go") as first:
        popped = await aclient.blpop([started_key(prefix, "lim_slot")], START_TIMEOUT_S)
        assert popped is not None, "the hanging call did not start"
        (victim,) = [w for w in workers if w.pid == json.loads(popped[1])["ppid"]]
        victim.host.kill_all()  # the whole host: its worker, pool and all
        killed_at = time.time()
        # Sent now: one slot is free, the other held by the dead host until its lease ends.
        async with running(orchestrator, others, "go") as second:
            await second.finish()
        await first.finish()
    await aclient.aclose()

    results = [
        u.result for _, u in [*first.updates, *second.updates] if isinstance(u, CallFinished)
    ]
    assert len(results) == OTHERS + 1
    assert all(r.status is CallStatus.SUCCESS for r in results), [r.response for r in results]
    client = fleet.client()
    recorded = entries(client, prefix, "lim_slot")
    assert {e["ppid"] for e in recorded} == {w.pid for w in workers}  # both hosts ran it
    ends = {(e["call_id"], e["execution"]): e["end"] for e in recorded if "end" in e}
    intervals = [
        # An execution that never ended was killed: it ran until the kill.
        (e["start"], ends.get((e["call_id"], e["execution"]), killed_at))
        for e in recorded
        if "end" not in e
    ]
    most, _ = most_at_once(intervals)
    assert most == SLOTS, intervals  # the limit was reached, never passed
    again, at = most_at_once(intervals, after=killed_at)
    assert again == SLOTS, intervals  # the dead host's slot came back within its lease
    assert at - killed_at <= lease_s + LEASE_SLACK_S, (at - killed_at, lease_s)
    assert not client.zcard(Keys(prefix).tool_slots("lim_slot"))  # every slot given back
    client.close()
    report(record_property, "host killed -> both slots in use again", at - killed_at)


async def test_rate_limit_holds_across_hosts_while_one_hosts_worker_is_killed(
    network: Network, fleet: HostFleet, settings: Settings, record_property: Record
) -> None:
    w1, w2 = network.hosts["w1"], network.hosts["w2"]
    bound = recovery_bound_s(settings, TOOLS)
    # Two calls at once per io worker: each host takes its share of the calls.
    workers = fleet.start_workers([w1, w2], [settings.default_io_pool], concurrency=2)
    client = fleet.client()
    prefix = settings.key_prefix
    n = RATE_COUNT * 3
    agent = limits_agent(*[Call("lim_rate", {"n": i}) for i in range(n)])
    hosts_of = {w.pid: w.host for w in workers}
    async with running(patient(settings, bound + 15), agent, "go") as run:

        def started_on_both() -> bool:
            return {e["pid"] for e in entries(client, prefix, "lim_rate")} == set(hosts_of)

        await until(started_on_both, "lim_rate to start on both hosts", START_TIMEOUT_S)
        w1.kill_all()  # mid-run: what it took runs again on w2 after the recovery bound
        await run.finish()
    results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    assert sorted(r.response.get("n", -1) for r in results) == list(range(n)), results
    starts = sorted(e["start"] for e in entries(client, prefix, "lim_rate"))
    assert len(starts) >= n
    # Any RATE_COUNT + 1 starts in a row span at least the period.
    spans = [starts[i + RATE_COUNT] - starts[i] for i in range(len(starts) - RATE_COUNT)]
    assert min(spans) >= RATE_PERIOD_S - RATE_SLACK_S, spans
    client.close()
    report(record_property, "shortest span of RATE_COUNT + 1 starts", min(spans))
