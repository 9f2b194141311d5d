"""A prefork worker killed while it holds a call of a tool it lacks, waiting to hand it on
to a live worker of its pool that has the tool, leaves the call's message to the broker:
it is delivered again, to a worker with the tool, and the call runs once - on Redis past
the visibility timeout, on RabbitMQ once the dead worker's connection is gone."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.brokers import ON_EACH_BROKER, Broker, publishing
from tests.faults.hand_on_tools import POOL
from tests.support import tool_call, until
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult

pytestmark = [pytest.mark.integration, ON_EACH_BROKER]

# A worker of POOL that has the tool, as its heartbeat record says; no such process runs.
HOLDER = "holder@elsewhere"
START_TIMEOUT_S = 15.0
WAIT_S = 30.0


def beat_holder(client: redis.Redis, keys: Keys) -> None:
    """HOLDER's heartbeat record, live for longer than the test."""
    record = {"hostname": HOLDER, "pools": [POOL], "tools": ["handed"], "pid": 1}
    client.set(keys.worker(HOLDER), json.dumps({**record, "started_at": time.time()}))
    client.zadd(keys.workers(), {HOLDER: time.time() + 600})


def results_of(client: redis.Redis, stream: str, call_id: str) -> list[ToolResult]:
    """Every result posted for `call_id` on `stream` so far."""
    found = []
    entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(stream))
    for _, fields in entries:
        result = ToolResult.model_validate(json.loads(fields[RESULT_FIELD.encode()]))
        if result.call_id == call_id:
            found.append(result)
    return found


@dataclass(frozen=True)
class Held:
    """A call of the tool that worker `lacking` holds to hand on; `news` starts workers that
    have the tool, `stream` gets the call's result."""

    lacking: WorkerProcess
    news: WorkerGroup
    call: ToolCall
    stream: str


@asynccontextmanager
async def held_to_hand_on(
    settings: Settings, client: redis.Redis, aclient: aioredis.Redis, name: str
) -> AsyncIterator[Held]:
    """A prefork worker of POOL without the tool, holding (for a minute) a call of it that
    it hands on to HOLDER; its workers and those of `news` stop at the end."""
    old = settings.model_copy(update={"tool_modules": ["tests.faults.slow_hand_on"]})
    new = settings.model_copy(update={"tool_modules": ["tests.faults.hand_on_tools"]})
    stream = f"{settings.key_prefix}:results:{name}"
    call = tool_call(uuid.uuid4().hex, "handed", f"s-{name}", stream, {"word": "kept"})
    with WorkerGroup(old) as olds, WorkerGroup(new) as news:
        lacking = olds.start([POOL], 1, "lacking")
        beat_holder(client, Keys(settings.key_prefix))
        async with publishing(settings, aclient) as publisher:
            dispatch = publisher.dispatch(call, queue_name(POOL))
            await publisher.publish([dispatch], record_in=f"{stream}:sent")
            await until(  # off the event loop: on RabbitMQ the outbox relay runs on it
                lambda: f"call {call.call_id} handed on to pool {POOL}" in lacking.log(),
                "the worker without the tool to hold the call",
                START_TIMEOUT_S,
            )
        yield Held(lacking, news, call, stream)


def run_on_a_worker_with_the_tool(
    settings: Settings, client: redis.Redis, held: Held
) -> tuple[float, WorkerProcess]:
    """Start a worker that has the tool; once the call's result is posted, stop it and
    check that the broker has no message of the call left. When the result came
    (monotonic), and the worker."""
    having = held.news.start([POOL], 1, "having")
    wait_for(
        lambda: bool(results_of(client, held.stream, held.call.call_id)),
        WAIT_S,
        "the call to run on the worker that has its tool",
    )
    came = time.monotonic()
    assert Broker(settings, client).left_of(held.call.call_id, [having], POOL) == 0
    return came, having


async def test_a_prefork_worker_killed_holding_a_call_to_hand_on_leaves_it_to_the_broker(
    settings: Settings,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    async with held_to_hand_on(settings, client, aclient, "killed") as held:
        held.lacking.kill()  # while it holds the call: its copy not published yet
        killed = time.monotonic()
        came, _ = run_on_a_worker_with_the_tool(settings, client, held)
        report_figure("kill -> result", f"{came - killed:.2f} s")

    (result,) = results_of(client, held.stream, held.call.call_id)
    assert result.status is CallStatus.SUCCESS and result.response == {"word": "kept"}
    assert result.worker.startswith("having@")


async def test_a_prefork_worker_stopped_holding_a_call_to_hand_on_gives_it_back_once(
    settings: Settings,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    """Stopped warmly, the worker leaves the message to the broker, which takes it back
    (its channel closed); it publishes no copy of its own: the call's message reaches a
    worker with the tool once."""
    async with held_to_hand_on(settings, client, aclient, "stopped") as held:
        held.lacking.stop()  # warm: what it holds goes back to the broker
        stopped = time.monotonic()
        assert "not handed on: the worker stopped" in held.lacking.log()
        came, having = run_on_a_worker_with_the_tool(settings, client, held)
        report_figure("stop -> result", f"{came - stopped:.2f} s")
        received = len(re.findall(r"Task tool\.handed\[\S+\] received", having.log()))

    assert received == 1  # the original alone: no copy of the worker's own went out
    (result,) = results_of(client, held.stream, held.call.call_id)
    assert result.status is CallStatus.SUCCESS and result.worker.startswith("having@")
