"""The io workers' intake on real workers and a real Redis: the broker layout it keeps,
what it does with messages it cannot run, retries, a warm shutdown, and the way back to
Celery's consumer.

Each test module has a Redis server of its own (tests.faults.conftest), so the broker's
shared keys (kombu's unacknowledged set, the queues) hold only this module's messages.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu.transport.redis import Channel

from tests.faults import probe
from tests.faults.conftest import fault_settings
from tests.faults.servers import RedisServer
from tests.faults.test_io_pools import agent_of, one_turn
from tests.faults.test_worker_faults import running
from tests.support import until
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import queue_name
from toolfleet.shared.messages import CallStatus, ToolCall

pytestmark = pytest.mark.integration

IO_QUEUE = queue_name("io")


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.require_redis_url())
    yield client
    client.close()


def envelope(
    settings: Settings, tool: str, args: dict[str, object] | None = None, queue: str = IO_QUEUE
) -> str:
    """A task message for `tool` on `queue`, as the orchestrator publishes it."""
    call = ToolCall(
        call_id=f"tf-{uuid.uuid4().hex[:16]}",
        tool=tool,
        args=args or {},
        session_id=uuid.uuid4().hex,
        app_name="app",
        user_id="u",
        invocation_id="inv",
        agent="io_agent",
        reply_to=f"{settings.key_prefix}:results:nobody",
        dispatched_at=time.time(),
    )
    publisher = CeleryPublisher(None)  # type: ignore[arg-type]  # encodes only: no client
    return publisher.encode(publisher.dispatch(call, queue))


def tag(raw: str) -> str:
    return str(json.loads(raw)["properties"]["delivery_tag"])


def test_a_take_records_each_message_as_kombu_does_so_kombus_sweep_restores_it(
    settings: Settings, client: redis.Redis
) -> None:
    queue = f"tools.take-{uuid.uuid4().hex[:8]}"
    good = [envelope(settings, "io_nap", {"seconds": 0}, queue) for _ in range(3)]
    client.lpush(queue, *good, "not json at all")  # the oldest is taken first
    batch = BrokerQueue(client, queue).take(10)

    assert [m.decode() for m in batch.messages] == good
    assert batch.malformed == [b"not json at all"]
    assert client.llen(queue) == 0
    for raw in good:
        message, exchange, routing_key = json.loads(client.hget(Channel.unacked_key, tag(raw)))
        assert message == json.loads(raw) and exchange == "" and routing_key == queue
        assert client.zscore(Channel.unacked_index_key, tag(raw)) is not None
    # kombu's own restore puts a taken message back on its queue: the layout is kombu's.
    from kombu import Connection

    with Connection(settings.require_redis_url()) as connection:
        connection.default_channel.qos.restore_by_tag(tag(good[0]))  # type: ignore[attr-defined]
    assert client.llen(queue) == 1
    assert decode(client.lindex(queue, 0)).task_id == decode(good[0]).task_id
    assert not client.hexists(Channel.unacked_key, tag(good[0]))
    client.delete(queue)
    client.hdel(Channel.unacked_key, *(tag(raw) for raw in good[1:]))
    client.zrem(Channel.unacked_index_key, *(tag(raw) for raw in good[1:]))


async def test_messages_it_cannot_run_are_dropped_and_logged_and_the_calls_beside_them_run(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    worker = workers.start(["io"])
    not_a_task = json.dumps({"body": "e30=", "headers": {}, "properties": {"delivery_tag": "t1"}})
    unknown = envelope(settings, "no_such_tool")
    client.lpush(IO_QUEUE, b"\xff not json", not_a_task, unknown)

    results = await one_turn(settings, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 5))

    assert len(results) == 5 and all(r.status is CallStatus.SUCCESS for r in results)
    # Each was taken, dropped and acknowledged: nothing is left to redeliver.
    await until(lambda: client.hlen(Channel.unacked_key) == 0, "the acks", 5)
    assert client.llen(IO_QUEUE) == 0
    log = worker.log()
    assert "dropped a message that is not kombu's JSON" in log
    assert "dropped a malformed message: not a Celery protocol 2 task message" in log
    assert "received a message of unregistered task 'tool.no_such_tool'" in log
    assert worker.alive()


async def test_a_transient_error_is_retried_on_the_io_pool_and_each_call_answered_once(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    workers.start(["io"])
    agent = agent_of(*[Call("io_flaky_once", {})] * 3)
    async with running(settings, agent, "go") as run:
        await run.finish()
        finished = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
        assert len(finished) == 3
        for result in finished:
            assert result.status is CallStatus.SUCCESS, result
            assert result.response == {"execution": 2} and result.attempt == 2
            assert await run.responses(result.call_id) == [result.response]
            assert probe.executions(client, settings.key_prefix, result.call_id) == 2


async def test_a_warm_shutdown_finishes_the_calls_in_flight_and_leaves_nothing_to_redeliver(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    worker = workers.start(["io"])
    agent = agent_of(*[Call("io_counted_nap", {"seconds": 1.5})] * 20)
    executions = f"{settings.key_prefix}:probe:executions:*"
    async with running(settings, agent, "go") as run:
        await until(lambda: len(client.keys(executions)) == 20, "20 calls to start", 10)
        worker.request_stop()  # SIGTERM: Celery's warm shutdown
        await run.finish()
        results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    await asyncio.to_thread(worker.wait_stopped, 10.0)

    assert worker.process.returncode == 0
    assert len(results) == 20
    assert all(r.status is CallStatus.SUCCESS and r.response == {"execution": 1} for r in results)
    assert client.zcard(Channel.unacked_index_key) == 0  # every one was acknowledged
    assert client.llen(IO_QUEUE) == 0


async def test_with_the_intake_off_celerys_consumer_takes_the_io_queue(
    redis_server: RedisServer,
) -> None:
    settings = fault_settings(redis_server.url(), io_intake=False)
    with WorkerGroup(settings) as group:
        worker = group.start(["io"])
        results = await one_turn(settings, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 3))
        assert [r.status for r in results] == [CallStatus.SUCCESS] * 3
        assert {r.worker for r in results} == {worker.hostname}
        assert "intake: taking" not in worker.log()
