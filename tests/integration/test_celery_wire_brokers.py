"""The wire contract with Celery and kombu on the real brokers (the in-memory half is
tests/unit/test_celery_wire_contract.py): kombu's own consumer, through the workers'
transport, takes a message we build off a real Redis by its blocking BRPOP; ours takes
one Celery's producer sent there; and on RabbitMQ the message our outbox relay publishes
is the one Celery's producer publishes for the same call.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery.worker.request import Request
from kombu import Connection, Queue
from kombu.message import Message

from tests.faults.rabbit import rabbit_vhost
from toolfleet.shared.celery_config import amqp_broker_config
from toolfleet.shared.celery_wire.build import TaskMessageBuilder
from toolfleet.shared.celery_wire.layout import UNACKED_INDEX_KEY, UNACKED_KEY
from toolfleet.shared.celery_wire.parse import decode, decode_delivery
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue, ack, keep_taken, restore
from toolfleet.shared.celery_wire.transport import broker_transport
from toolfleet.shared.config import Settings
from toolfleet.shared.tracing import TRACEPARENT
from toolfleet.workers.intake.redis_source import RedisTaker
from toolfleet.workers.intake.unblocking import UnblockableWaits

pytestmark = pytest.mark.integration

TASK = "tool.wire_contract"
CALL = {"call": {"call_id": "c1", "args": {"n": 1}}}
ARGSREPR, KWARGSREPR = "{'n': 1}", "{'call_id': 'c1', 'session_id': 's1'}"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
WAIT_S = 5


def built(queue: str) -> str:
    return TaskMessageBuilder("orchestrator@test").redis_message(
        TASK,
        CALL,
        queue=queue,
        argsrepr=ARGSREPR,
        kwargsrepr=KWARGSREPR,
        headers={TRACEPARENT: PARENT},
    )


def wire_contract(call: dict[str, Any]) -> None:
    """TASK, as a worker registers a tool's."""


def celery_app(**config: Any) -> Celery:
    app = Celery("wire-contract", set_as_current=False)
    app.conf.update(config)
    app.task(name=TASK, ignore_result=True)(wire_contract)
    return app


@pytest.fixture
def queue(settings: Settings) -> Iterator[str]:
    """A queue of this test's own on the tests' Redis, removed after (and kombu's
    bindings of it)."""
    name = f"tools.wire-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(settings.require_redis_url())
    for key in client.scan_iter(f"*{name}*"):
        client.delete(key)
    client.close()


def test_kombus_consumer_takes_a_message_we_build_off_redis_as_celerys_worker_reads_it(
    settings: Settings, queue: str
) -> None:
    url = settings.require_redis_url()
    client = redis.Redis.from_url(url)
    raw = built(queue)
    tag = json.loads(raw)["properties"]["delivery_tag"]
    client.lpush(queue, raw)
    received: list[Message] = []
    app = celery_app(broker_url=url)
    try:
        with Connection(url, transport=broker_transport(url)) as connection:
            with connection.Consumer(
                Queue(queue), callbacks=[lambda _, message: received.append(message)]
            ):
                connection.drain_events(timeout=WAIT_S)  # kombu's BRPOP on the real server
            [message] = received
            assert client.hexists(UNACKED_KEY, tag)  # recorded by kombu as ours records one
            request = Request(message, app=app, hostname="w@test", task=app.tasks[TASK])
            assert (request.name, request.args, request.kwargs) == (TASK, [], CALL)
            assert (request.argsrepr, request.kwargsrepr) == (ARGSREPR, KWARGSREPR)
            assert request.request_dict[TRACEPARENT] == PARENT
            assert request.delivery_info["routing_key"] == queue
            ack(client, [tag])  # our ack clears what kombu's consumer took
            assert not client.hexists(UNACKED_KEY, tag)
            assert client.zscore(UNACKED_INDEX_KEY, tag) is None
            connection.default_channel.qos._delivered.clear()  # type: ignore[attr-defined]
    finally:
        app.close()
        client.close()


def test_ours_takes_a_message_celery_sent_to_redis_and_kombu_puts_it_back(
    settings: Settings, queue: str
) -> None:
    url = settings.require_redis_url()
    client = redis.Redis.from_url(url)
    app = celery_app(broker_url=url)
    try:
        app.send_task(TASK, kwargs=CALL, queue=queue, countdown=30, headers={TRACEPARENT: PARENT})
        sent = client.lindex(queue, 0)
        assert isinstance(sent, bytes)
        [raw] = BrokerQueue(client, queue).take(10).messages
        message = decode(raw)
        assert (message.task, message.kwargs, message.headers[TRACEPARENT]) == (TASK, CALL, PARENT)
        assert message.eta() is not None
        entry = client.hget(UNACKED_KEY, message.tag)
        assert entry is not None and json.loads(entry) == [json.loads(sent), "", queue]
        with Connection(url, transport=broker_transport(url)) as connection:
            restore(connection, message.tag)  # kombu's own restore, by tag
        assert not client.hexists(UNACKED_KEY, message.tag)
        [back] = client.lrange(queue, 0, -1)
        assert decode(back).task_id == message.task_id
        assert decode(back).delivery_info["redelivered"] is True
    finally:
        app.close()
        client.close()


def test_the_message_our_relay_publishes_to_rabbitmq_is_the_one_celery_publishes(
    settings: Settings,
) -> None:
    with rabbit_vhost() as url:
        queue = "tools.wire"
        ours = built(queue)
        task_id = json.loads(ours)["headers"]["id"]
        publisher = AmqpPublisher(url)
        publisher.publish([ours])  # declares the queue as the workers do (quorum)
        publisher.close()
        worker_config = amqp_broker_config(settings.model_copy(update={"broker_url": url}))
        app = celery_app(**worker_config)
        try:
            app.send_task(
                TASK, kwargs=CALL, queue=queue, task_id=task_id, argsrepr=ARGSREPR,
                kwargsrepr=KWARGSREPR, ignore_result=False, headers={TRACEPARENT: PARENT},
            )  # fmt: skip
        finally:
            app.close()
        with Connection(url) as connection:
            channel: Any = connection.channel()
            mine, theirs = (
                channel.basic_get(queue, no_ack=True),
                channel.basic_get(queue, no_ack=True),
            )
            assert mine is not None and theirs is not None
            received = channel.message_to_python(mine)
            channel.close()
    my_properties, their_properties = dict(mine.properties), dict(theirs.properties)
    my_headers = my_properties.pop("application_headers")
    their_headers = their_properties.pop("application_headers")
    # Celery's names the reply queue of its RPC result backend; toolfleet uses none.
    assert my_properties.pop("reply_to") == ""
    their_properties.pop("reply_to")
    assert my_properties == their_properties
    assert my_properties["delivery_mode"] == 2 and my_properties["correlation_id"] == task_id
    assert set(my_headers) == set(their_headers)
    for name in set(their_headers) - {"origin"}:  # ours names the orchestrator
        assert my_headers[name] == their_headers[name], name
    assert json.loads(mine.body) == json.loads(theirs.body)
    assert (mine.delivery_info["exchange"], mine.delivery_info["routing_key"]) == ("", queue)
    assert received.payload[:2] == [[], CALL] and received.headers["task"] == TASK


def test_ours_reads_a_redelivery_from_rabbitmq_as_celerys_request_reads_it(
    settings: Settings,
) -> None:
    with rabbit_vhost() as url:
        queue = "tools.wire"
        publisher = AmqpPublisher(url)
        publisher.publish([built(queue)])  # as the outbox relay publishes a call
        publisher.close()
        app = celery_app(**amqp_broker_config(settings.model_copy(update={"broker_url": url})))
        try:
            with Connection(url) as connection:
                channel: Any = connection.channel()
                first = channel.basic_get(queue, no_ack=False)
                assert first is not None and first.delivery_info["redelivered"] is False
                channel.basic_reject(first.delivery_tag, requeue=True)  # as a dead worker's
                again = channel.basic_get(queue, no_ack=True)
                assert again is not None
                theirs = Request(
                    channel.message_to_python(again),
                    app=app,
                    hostname="w@test",
                    task=app.tasks[TASK],
                )
                channel.close()
        finally:
            app.close()
    ours = decode_delivery("1:2", again.body, again.headers, again.properties, again.delivery_info)
    assert (ours.tag, ours.task, ours.task_id) == ("1:2", TASK, theirs.id)
    assert (ours.args, ours.kwargs) == (theirs.args, theirs.kwargs) == ([], CALL)
    assert (ours.argsrepr, ours.kwargsrepr) == (theirs.argsrepr, theirs.kwargsrepr)
    assert ours.headers[TRACEPARENT] == theirs.request_dict[TRACEPARENT] == PARENT
    # The request's delivery info, redelivered flag included (a redelivery may take over
    # a claim whose lease lapsed).
    assert ours.delivery_info == theirs.delivery_info
    assert ours.delivery_info["redelivered"] is True
    assert ours.delivery_info["routing_key"] == queue
    assert ours.properties["correlation_id"] == theirs.correlation_id == theirs.id


def test_a_message_only_redis_can_read_is_dropped_by_the_tag_it_was_taken_under(
    settings: Settings, queue: str
) -> None:
    """Lua's JSON reader takes a hex number Python's refuses: the take records it, the
    worker cannot read it, and acknowledges it by the tag the take recorded - so no
    record is left for every worker's sweep to fail on."""
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        envelope = json.loads(built(queue))
        envelope["properties"]["delivery_tag"] = "tag-lua-only"
        raw = json.dumps(envelope).replace('"retries": 0', '"retries": 0x0')
        client.lpush(queue, raw)
        stopping = threading.Event()
        taker = RedisTaker(
            client, queue, stopping, UnblockableWaits(settings.require_redis_url(), client)
        )

        taken = taker.take(10)

        assert taken.messages == []
        (dropped,) = taken.dropped
        assert dropped.tag == "tag-lua-only" and "malformed" in dropped.reason
        assert client.hexists(UNACKED_KEY, "tag-lua-only")  # recorded by the take
        ack(client, [dropped.tag])
        assert not client.hexists(UNACKED_KEY, "tag-lua-only")
    finally:
        client.close()


def test_a_message_kept_taken_is_scored_anew_and_an_acknowledged_one_is_not_again(
    settings: Settings, queue: str
) -> None:
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        client.lpush(queue, built(queue))
        [raw] = BrokerQueue(client, queue).take(10).messages
        tag = decode(raw).tag
        client.zadd(UNACKED_INDEX_KEY, {tag: 1.0})  # taken long ago, as the sweep sees it

        keep_taken(client, [tag])
        score = client.zscore(UNACKED_INDEX_KEY, tag)
        assert score is not None and score > 1.0

        ack(client, [tag])
        keep_taken(client, [tag])
        assert client.zscore(UNACKED_INDEX_KEY, tag) is None  # not recorded again
    finally:
        client.close()
