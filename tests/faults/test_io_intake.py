"""The io workers' intake on real workers, a real Redis and a real RabbitMQ: the broker
layout it keeps on Redis, what it does with messages it cannot run, retries, a warm
shutdown, and the way back to Celery's consumer, with the tool queues on each broker.

Each test module has a Redis server of its own (tests.faults.conftest) and a RabbitMQ
vhost of its own, so the broker's shared keys (kombu's unacknowledged set, the queues)
hold only this module's messages.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import amqp
import pytest
import redis
from kombu import Connection
from kombu.transport.redis import Channel

from tests.faults import probe
from tests.faults.brokers import AMQP_ONLY, ON_EACH_BROKER
from tests.faults.conftest import fault_settings
from tests.faults.servers import RedisServer
from tests.faults.test_io_pools import agent_of, one_turn
from tests.faults.test_worker_faults import running
from tests.support import first_deliveries, until
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, ON_EACH_BROKER]

IO_QUEUE = queue_name("io")
# Bounds a turn of a few short calls on a loaded machine: a worker that stalls misses it.
TURN_TIMEOUT_S = 60


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url())
    yield client
    client.close()


def push(settings: Settings, client: redis.Redis, raws: Sequence[bytes | str]) -> None:
    """Put `raws` on the io queue as they are: items of its Redis list, or the bodies of
    messages on its RabbitMQ queue."""
    if not settings.broker_is_amqp:
        client.lpush(IO_QUEUE, *raws)
        return
    with Connection(settings.require_broker_url()) as connection:
        channel: Any = connection.channel()
        for raw in raws:
            body = raw.encode() if isinstance(raw, str) else raw
            message = amqp.Message(body, content_type="application/json")
            channel.basic_publish(message, exchange="", routing_key=IO_QUEUE)


def publish(settings: Settings, client: redis.Redis, envelopes: Sequence[str]) -> None:
    """Send task messages built as the orchestrator builds them, as it sends them: onto
    the Redis list, or through the outbox relay's publisher to RabbitMQ."""
    if not settings.broker_is_amqp:
        client.lpush(IO_QUEUE, *envelopes)
        return
    publisher = AmqpPublisher(settings.require_broker_url())
    try:
        publisher.publish(envelopes)
    finally:
        publisher.close()


async def successor(settings: Settings, workers: WorkerGroup) -> WorkerProcess:
    """On RabbitMQ, once the io worker is gone (RabbitMQ took back at once what it held
    unacknowledged): a new io worker, after it answered a call. What was taken back is
    delivered before that call, so the new worker has taken all of it by then."""
    after = await asyncio.to_thread(workers.start, ["io"])
    results = await one_turn(settings, agent_of(Call("io_nap", {"seconds": 0})))
    assert [(r.status, r.worker) for r in results] == [(CallStatus.SUCCESS, after.hostname)]
    return after


def deliveries(settings: Settings, client: redis.Redis, call_id: str) -> int:
    """How many times the broker delivered the call's first attempt to a worker."""
    return first_deliveries(client, Keys(settings.key_prefix), call_id)


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
    redis_server: RedisServer, client: redis.Redis
) -> None:
    settings = fault_settings(redis_server.url())
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
    push(settings, client, [b"\xff not json", not_a_task])
    publish(settings, client, [envelope(settings, "no_such_tool")])

    results = await one_turn(settings, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 5))

    assert len(results) == 5 and all(r.status is CallStatus.SUCCESS for r in results)
    log = worker.log()
    assert "dropped a malformed message: not a Celery protocol 2 task message" in log
    assert "received a message of unregistered task 'tool.no_such_tool'" in log
    assert worker.alive()
    # Each was taken, dropped and acknowledged: nothing is left to deliver again.
    if settings.broker_is_amqp:
        worker.kill()
        after = await successor(settings, workers)
        assert "dropped a" not in after.log()
        assert "received a message of unregistered task" not in after.log()
    else:
        assert "dropped a message that is not kombu's JSON" in log
        await until(lambda: client.hlen(Channel.unacked_key) == 0, "the acks", 5)
        assert client.llen(IO_QUEUE) == 0


def push_unreadable(
    settings: Settings, properties: Sequence[dict[str, Any]], queue: str = IO_QUEUE
) -> None:
    """Publish a message on `queue` for each of `properties`, its basic properties as
    they are (bytes that are no UTF-8 included), as any client of RabbitMQ may."""
    with Connection(settings.require_broker_url()) as connection:
        channel: Any = connection.channel()
        channel.confirm_select()  # each publish returns once RabbitMQ has it
        for each in properties:
            channel.basic_publish(amqp.Message(b"{}", **each), exchange="", routing_key=queue)


@AMQP_ONLY
async def test_a_message_whose_properties_do_not_read_is_dropped_and_the_calls_after_it_run(
    settings: Settings, workers: WorkerGroup
) -> None:
    worker = workers.start(["io"])
    # First in the queue: py-amqp raised reading each, and the intake, connecting again,
    # was delivered the same one first again, for ever.
    push_unreadable(settings, [{"content_type": b"\xff\xfejson"}, {"reply_to": b"\xc3("}])

    turn = one_turn(settings, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 5))
    results = await asyncio.wait_for(turn, TURN_TIMEOUT_S)

    assert [r.status for r in results] == [CallStatus.SUCCESS] * 5
    assert {r.worker for r in results} == {worker.hostname}
    log = worker.log()
    assert log.count("dropped a message whose properties could not be read") == 2, log
    assert "UnicodeDecodeError" in log
    assert "connection to RabbitMQ dropped" not in log  # taken on the first connection
    # Each was dropped and acknowledged: nothing is left to deliver again.
    worker.kill()
    after = await successor(settings, workers)
    assert "dropped a" not in after.log()


@AMQP_ONLY
async def test_with_the_intake_off_a_message_whose_properties_do_not_read_is_dropped(
    settings: Settings,
) -> None:
    """Celery's consumer takes the io queue, as a prefork worker's (test_amqp_broker.py)."""
    consumer = settings.model_copy(update={"io_intake": False})
    with WorkerGroup(consumer) as group:
        worker = group.start(["io"])
        push_unreadable(consumer, [{"content_type": b"\xff\xfejson"}])

        turn = one_turn(consumer, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 3))
        results = await asyncio.wait_for(turn, TURN_TIMEOUT_S)

        assert [r.status for r in results] == [CallStatus.SUCCESS] * 3, worker.log()[-3000:]
        log = worker.log()
        assert log.count("dropped a message whose properties could not be read") == 1, log
        assert "Connection to broker lost" not in log
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
    # Every one was acknowledged: none is delivered again.
    if settings.broker_is_amqp:
        await successor(settings, workers)
        assert [deliveries(settings, client, r.call_id) for r in results] == [1] * 20
    else:
        assert client.zcard(Channel.unacked_index_key) == 0
        assert client.llen(IO_QUEUE) == 0


async def test_with_the_intake_off_celerys_consumer_takes_the_io_queue(
    settings: Settings,
) -> None:
    consumer = settings.model_copy(update={"io_intake": False})
    with WorkerGroup(consumer) as group:
        worker = group.start(["io"])
        results = await one_turn(consumer, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 3))
        assert [r.status for r in results] == [CallStatus.SUCCESS] * 3
        assert {r.worker for r in results} == {worker.hostname}
        assert "intake: taking" not in worker.log()
