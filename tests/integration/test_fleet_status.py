"""`toolfleet status` per pool (its live workers, the tools each serves, and the tools only
some serve) and the queue gauges of /metrics an autoscaler reads, on real workers."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from pydantic import SecretStr

from tests.integration import unserved_tools
from tests.integration.http_support import TOKEN, bearer
from tests.integration.test_metrics import scrape, value
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import queue_name
from toolfleet.shared.messages import ToolCall

pytestmark = pytest.mark.integration

FULL = ["tests.integration.census_tools", "tests.integration.census_extra_tools"]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def census(settings: Settings) -> Iterator[Settings]:
    """Three prefork workers of pool `census` under a key prefix of their own: two load
    census_tools and census_extra_tools, the third census_tools only; and an io worker of
    `census_io`."""
    own = settings.model_copy(
        update={"key_prefix": f"{settings.key_prefix}-census", "io_pools": ["census_io"]}
    )
    full = own.model_copy(update={"tool_modules": FULL})
    fewer = own.model_copy(update={"tool_modules": FULL[:1]})
    with WorkerGroup(full) as group, WorkerGroup(fewer) as short:
        group.start_all(
            [
                WorkerSpec(["census"], 1, "census1"),
                WorkerSpec(["census"], 1, "census2"),
                WorkerSpec(["census_io"], 4, "censusio"),
            ]
        )
        short.start(["census"], 1, "census3")
        yield own


@pytest.fixture
def census_env(
    census: Settings, orchestrator_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLFLEET_KEY_PREFIX", census.key_prefix)


def test_status_counts_each_pools_workers_per_tool_and_flags_a_missing_module(
    census_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "census: 3 live workers, 0/3 slots busy, 0 waiting in tools.census" in out, out
    lines = out.splitlines()
    assert any(line.split() == ["hold", "3", "of", "3", "workers"] for line in lines), out
    assert any(line.split() == ["tally", "2", "of", "3", "workers"] for line in lines), out
    flags = [line.strip() for line in lines if line.strip().startswith("!")]
    assert [f.split()[1] for f in flags] == ["tally"], out
    flag = flags[0]
    assert flag.split("@")[0].strip() == "! tally is missing on census3", out
    assert flag.endswith(
        ": add tests.integration.census_extra_tools to TOOLFLEET_TOOL_MODULES there"
    ), out


def test_status_json_has_the_same_per_pool_view(
    census_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    (pool,) = [p for p in state["pools"] if p["pool"] == "census"]
    assert sorted(w.split("@")[0] for w in pool["workers"]) == ["census1", "census2", "census3"]
    # Its workers' tools of other pools (hold_io) are not this pool's.
    assert pool["tools"] == {"hold": 3, "tally": 2}
    assert (pool["slots"], pool["busy"], pool["waiting"]) == (3, 0, 0)
    assert [
        (t["name"], [w.split("@")[0] for w in t["lacking"]], t["modules"]) for t in pool["partial"]
    ] == [("tally", ["census3"], ["tests.integration.census_extra_tools"])]


def pool_state(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    assert cli.main(["status", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    (pool,) = [p for p in state["pools"] if p["pool"] == name]
    return dict(pool)


def wait_for_busy(capsys: pytest.CaptureFixture[str], name: str, busy: int) -> dict[str, Any]:
    pool: dict[str, Any] = {}

    def reached() -> bool:
        pool.update(pool_state(capsys, name))
        return bool(pool["busy"] == busy)

    # The workers beat every 0.5 s: a status read between beats shows the last one.
    wait_for(reached, WAIT_S, f"{busy} busy slots in pool {name}", interval_s=0.1)
    return pool


# A prefork worker's call is one of Celery's active requests; an io worker's a coroutine
# its intake started on the call loop.
@pytest.mark.parametrize(
    ("pool", "tool", "slots"), [("census", "hold", 3), ("census_io", "hold_io", 4)]
)
def test_status_counts_the_slots_a_running_call_holds(
    census: Settings,
    census_env: None,
    capsys: pytest.CaptureFixture[str],
    pool: str,
    tool: str,
    slots: int,
) -> None:
    url = census.require_redis_url()
    key = f"{census.key_prefix}:release-{uuid.uuid4().hex[:6]}"
    asyncio.run(send(census, pool, tool, {"url": url, "key": key, "timeout_s": WAIT_S}))
    held = wait_for_busy(capsys, pool, 1)
    assert (held["busy"], held["slots"], held["waiting"]) == (1, slots, 0)
    with redis.Redis.from_url(url) as client:
        client.rpush(key, "go")
    assert wait_for_busy(capsys, pool, 0)["busy"] == 0


@pytest.fixture
async def idle(settings: Settings, orchestrator_env: dict[str, str]) -> AsyncIterator[RunningHttp]:
    """`serve --http` for an agent whose tool's pool (`unserved`) has no worker."""
    own = settings.model_copy(update={"key_prefix": f"{settings.key_prefix}-idle"})
    agent = Agent(
        name="idle_agent", tools=[unserved_tools.queued], model=ScriptedModel([say("ok")])
    )
    async with serve_http(
        [agent], own, HttpSettings(token=SecretStr(TOKEN)), "127.0.0.1", 0
    ) as running:
        yield running
    client = aioredis.Redis.from_url(settings.require_redis_url())
    await client.delete(queue_name("unserved"))
    await client.aclose()


async def send_unserved(settings: Settings, count: int) -> None:
    """Push `count` calls onto the unserved pool's queue, as a turn would."""
    for i in range(count):
        await send(settings, "unserved", "queued", {"item": str(i)})


async def send(settings: Settings, pool: str, tool: str, args: dict[str, Any]) -> None:
    """Push a call of `tool` onto `pool`'s queue, as a turn would."""
    call = ToolCall(
        call_id=uuid.uuid4().hex, tool=tool, args=args, session_id="s", app_name="census",
        user_id="u1", invocation_id="i", agent="census", reply_to=f"{settings.key_prefix}:r",
        dispatched_at=time.time(),
    )  # fmt: skip
    client = aioredis.Redis.from_url(settings.require_redis_url())
    # Signed with the fleet's key: its workers run no other call.
    publisher = CeleryPublisher(client, signer=CallSigner.of(settings.fleet_key))
    await publisher.publish(
        [publisher.dispatch(call, queue_name(pool))],
        record_in=f"{settings.key_prefix}:sent-{call.call_id}",
    )
    await client.aclose()


async def test_metrics_show_calls_waiting_for_a_pool_nobody_serves_and_their_age(
    settings: Settings, idle: RunningHttp
) -> None:
    await send_unserved(settings, 3)
    async with httpx.AsyncClient(headers=bearer(), timeout=WAIT_S) as client:
        first = await scrape(client, f"{idle.url}/metrics")
        assert value(first, "toolfleet_queue_depth", pool="unserved") == 3
        assert value(first, "toolfleet_live_workers", pool="unserved") == 0
        assert value(first, "toolfleet_worker_slots", pool="unserved") == 0
        age = value(first, "toolfleet_queue_oldest_age_seconds", pool="unserved")
        assert 0 < age < WAIT_S
        loop, grown = asyncio.get_running_loop(), age

        def has_grown() -> bool:  # the oldest call waits on: its age grows between scrapes
            nonlocal grown
            later = asyncio.run_coroutine_threadsafe(scrape(client, f"{idle.url}/metrics"), loop)
            grown = value(later.result(), "toolfleet_queue_oldest_age_seconds", pool="unserved")
            return grown >= age + 0.5

        await asyncio.to_thread(wait_for, has_grown, WAIT_S, "the oldest call's age to grow", 0.1)
        assert grown >= age + 0.5
        await send_unserved(settings, 2)  # newer calls leave the oldest's age as it is
        more = await scrape(client, f"{idle.url}/metrics")
        assert value(more, "toolfleet_queue_depth", pool="unserved") == 5
        assert value(more, "toolfleet_queue_oldest_age_seconds", pool="unserved") >= grown
