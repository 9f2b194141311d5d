"""A prefork worker killed while it holds a call of a tool it lacks, waiting to hand it on
to a live worker of its pool that has the tool, leaves the call's message to the broker:
it is delivered again, to a worker with the tool, and the call runs once - on Redis past
the visibility timeout, on RabbitMQ once the dead worker's connection is gone."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import cast

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.brokers import ON_EACH_BROKER, Broker, publishing
from tests.faults.hand_on_tools import POOL
from tests.support import tool_call, until
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult

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


async def test_a_prefork_worker_killed_holding_a_call_to_hand_on_leaves_it_to_the_broker(
    settings: Settings,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    keys = Keys(settings.key_prefix)
    old = settings.model_copy(update={"tool_modules": ["tests.faults.slow_hand_on"]})
    new = settings.model_copy(update={"tool_modules": ["tests.faults.hand_on_tools"]})
    stream = f"{settings.key_prefix}:results:hand-on"
    call = tool_call(uuid.uuid4().hex, "handed", "s-hand-on", stream, {"word": "kept"})
    with WorkerGroup(old) as olds, WorkerGroup(new) as news:
        lacking = olds.start([POOL], 1, "lacking")
        beat_holder(client, keys)
        async with publishing(settings, aclient) as publisher:
            dispatch = publisher.dispatch(call, queue_name(POOL))
            await publisher.publish([dispatch], record_in=f"{stream}:sent")
            await until(  # off the event loop: on RabbitMQ the outbox relay runs on it
                lambda: f"call {call.call_id} handed on to pool {POOL}" in lacking.log(),
                "the worker without the tool to hold the call",
                START_TIMEOUT_S,
            )

        lacking.kill()  # while it holds the call: its copy not published yet
        killed = time.monotonic()
        having = news.start([POOL], 1, "having")
        wait_for(
            lambda: bool(results_of(client, stream, call.call_id)),
            WAIT_S,
            "the call to run on the worker that has its tool",
        )
        report_figure("kill -> result", f"{time.monotonic() - killed:.2f} s")
        broker = Broker(settings, client)
        assert broker.left_of(call.call_id, [having], POOL) == 0  # no copy left to run

    (result,) = results_of(client, stream, call.call_id)
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
    keys = Keys(settings.key_prefix)
    old = settings.model_copy(update={"tool_modules": ["tests.faults.slow_hand_on"]})
    new = settings.model_copy(update={"tool_modules": ["tests.faults.hand_on_tools"]})
    stream = f"{settings.key_prefix}:results:given-back"
    call = tool_call(uuid.uuid4().hex, "handed", "s-given-back", stream, {"word": "kept"})
    with WorkerGroup(old) as olds, WorkerGroup(new) as news:
        lacking = olds.start([POOL], 1, "lacking")
        beat_holder(client, keys)
        async with publishing(settings, aclient) as publisher:
            dispatch = publisher.dispatch(call, queue_name(POOL))
            await publisher.publish([dispatch], record_in=f"{stream}:sent")
            await until(
                lambda: f"call {call.call_id} handed on to pool {POOL}" in lacking.log(),
                "the worker without the tool to hold the call",
                START_TIMEOUT_S,
            )

        lacking.stop()  # warm: what it holds goes back to the broker
        stopped = time.monotonic()
        assert "not handed on: the worker stopped" in lacking.log()
        having = news.start([POOL], 1, "having")
        wait_for(
            lambda: bool(results_of(client, stream, call.call_id)),
            WAIT_S,
            "the call to run on the worker that has its tool",
        )
        report_figure("stop -> result", f"{time.monotonic() - stopped:.2f} s")
        broker = Broker(settings, client)
        assert broker.left_of(call.call_id, [having], POOL) == 0
        received = len(re.findall(r"Task tool\.handed\[\S+\] received", having.log()))

    assert received == 1  # the original alone: no copy of the worker's own went out
    (result,) = results_of(client, stream, call.call_id)
    assert result.status is CallStatus.SUCCESS and result.worker.startswith("having@")
