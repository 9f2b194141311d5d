"""The wire contract with the installed Celery and kombu (toolfleet.shared.celery_wire).

Celery's own producer and consumer and kombu's own Redis transport run here against an
in-memory Redis (fakeredis behind kombu's transport), beside ours: a message we build
is the one Celery sends, what Celery sends is read by ours as Celery's worker reads it,
and a message taken by either consumer is recorded, put back and acknowledged the same
way. A Celery or kombu release that changes any of it fails these tests: raise the upper
bounds in pyproject.toml only once they pass on it.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
from celery import Celery, Task
from celery.app.trace import trace_task
from celery.worker.request import Request
from kombu import Connection, Queue
from kombu.message import Message
from kombu.transport import redis as kombu_redis

from toolfleet.shared.celery_wire import layout
from toolfleet.shared.celery_wire.build import TaskMessageBuilder
from toolfleet.shared.celery_wire.parse import decode, received_kwargs, tag_of, task_kwargs
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue, ack, restore, restore_visible
from toolfleet.shared.celery_wire.worker import run_as_request
from toolfleet.shared.tracing import TRACEPARENT

QUEUE = "tools.contract"
TASK = "tool.contract"
CALL = {"call": {"call_id": "c1", "args": {"n": 1}, "nested": [1, {"x": None}]}}
ARGSREPR = "{'n': 1}"
KWARGSREPR = "{'call_id': 'c1', 'session_id': 's1'}"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
WORKER = "io.1@test"

# The one header whose value differs on purpose: ours names the orchestrator, Celery's
# the process that sent it. Every other header must be equal.
SENDER = {"origin"}
# Celery's producer names the reply queue of its RPC result backend (workers reply
# there only with that backend; toolfleet's results go on streams of its own) and
# copies the call's options into the properties (workers read them from the headers).
CELERY_ONLY_PROPERTIES = {"reply_to", "argsrepr", "kwargsrepr"}


@dataclass
class Broker:
    """An in-memory Redis, kombu's Redis transport on it, and a Celery app using it."""

    server: fakeredis.FakeServer
    transport: type[kombu_redis.Transport]
    client: fakeredis.FakeRedis
    app: Celery

    def connection(self, **transport_options: Any) -> Connection:
        """A kombu connection to the in-memory Redis, through kombu's own transport."""
        return Connection("redis://", transport=self.transport, transport_options=transport_options)

    def sent(self, **options: Any) -> bytes:
        """The raw message Celery's producer pushes for a call of TASK (taken off the list)."""
        self.app.send_task(TASK, kwargs=CALL, queue=QUEUE, **options)
        raw = self.client.rpop(QUEUE)
        assert isinstance(raw, bytes)
        return raw

    def received(self, raw: bytes | str, **transport_options: Any) -> Message:
        """`raw`, pushed onto QUEUE and taken by kombu's own consumer, acked."""
        self.client.lpush(QUEUE, raw)
        with self.connection(**transport_options) as connection:
            message = Queue(QUEUE)(connection.default_channel).get(no_ack=False)
            assert message is not None
            message.ack()
        return message


@pytest.fixture
def broker() -> Iterator[Broker]:
    server = fakeredis.FakeServer()

    class InMemoryChannel(kombu_redis.Channel):
        connection_class = fakeredis.FakeRedisConnection

        def _connparams(self, asynchronous: bool = False) -> Any:
            params = super()._connparams(asynchronous)  # type: ignore[misc]
            params["server"] = server
            return params

    class InMemoryTransport(kombu_redis.Transport):
        Channel = InMemoryChannel

    app = Celery("contract", broker="redis://", set_as_current=False)
    app.conf.broker_transport = InMemoryTransport
    client = fakeredis.FakeRedis(server=server)
    yield Broker(server, InMemoryTransport, client, app)
    app.close()
    client.close()


def built(headers: dict[str, str] | None = None) -> str:
    return TaskMessageBuilder("orchestrator@test").redis_message(
        TASK, CALL, queue=QUEUE, argsrepr=ARGSREPR, kwargsrepr=KWARGSREPR, headers=headers
    )


def body_of(envelope: dict[str, Any]) -> Any:
    assert envelope["properties"]["body_encoding"] == "base64"
    return json.loads(base64.b64decode(envelope["body"]))


def contract_task(self: Task[Any, Any], call: dict[str, Any]) -> None:
    """TASK as a worker registers a tool's (its body is each test's)."""


def registered(broker: Broker) -> Task[Any, Any]:
    task: Task[Any, Any] = broker.app.tasks.get(TASK) or broker.app.task(
        name=TASK, bind=True, ignore_result=True, max_retries=5
    )(contract_task)
    return task


def celery_request(broker: Broker, message: Message) -> Request:
    return Request(message, app=broker.app, hostname=WORKER, task=registered(broker))


# The layout: kombu's keys, by value and by what kombu's channel does with them.


def test_the_redis_layout_is_kombus(broker: Broker) -> None:
    channel = kombu_redis.Channel
    assert channel.sep == layout.PRIORITY_SEPARATOR
    assert list(layout.PRIORITY_STEPS) == list(channel.priority_steps)
    assert list(layout.PRIORITY_STEPS) == list(kombu_redis.PRIORITY_STEPS)
    assert channel.unacked_key == layout.UNACKED_KEY
    assert channel.unacked_index_key == layout.UNACKED_INDEX_KEY
    with broker.connection() as connection:
        kombus: Any = connection.default_channel
        lists = [kombus._q_for_pri(QUEUE, step) for step in kombus.priority_steps]
    assert layout.priority_lists(QUEUE) == lists


def test_celerys_priorities_land_on_our_lists_and_we_take_them_in_kombus_order(
    broker: Broker,
) -> None:
    for priority in (9, 4, 0):
        broker.app.send_task(TASK, kwargs={"call": {"p": priority}}, queue=QUEUE, priority=priority)
    lists = layout.priority_lists(QUEUE)
    assert [broker.client.llen(name) for name in lists] == [1, 1, 0, 1]
    batch = BrokerQueue(broker.client, QUEUE).take(10)
    ours = [decode(raw).kwargs["call"]["p"] for raw in batch.messages]
    for priority in (9, 4, 0):
        broker.app.send_task(TASK, kwargs={"call": {"p": priority}}, queue=QUEUE, priority=priority)
    with broker.connection() as connection:
        queue = Queue(QUEUE)(connection.default_channel)
        kombus = [queue.get(no_ack=True).payload[1]["call"]["p"] for _ in range(3)]  # type: ignore[union-attr]
    assert ours == kombus == [0, 4, 9]


# Building: our message is the one Celery's producer sends through kombu's transport.


@pytest.mark.parametrize("headers", [None, {TRACEPARENT: PARENT}], ids=["plain", "traced"])
def test_a_message_we_build_is_the_one_celery_sends(
    broker: Broker, headers: dict[str, str] | None
) -> None:
    ours = json.loads(built(headers))
    task_id = ours["headers"]["id"]
    theirs = json.loads(
        broker.sent(
            task_id=task_id,
            argsrepr=ARGSREPR,
            kwargsrepr=KWARGSREPR,
            ignore_result=False,
            headers=headers or {},
        )
    )
    assert list(ours) == list(theirs)  # body, content-encoding, content-type, headers, ...
    assert ours["content-type"] == theirs["content-type"] == "application/json"
    assert ours["content-encoding"] == theirs["content-encoding"]
    # Every header Celery sends, with its value; the sender's name is ours on purpose.
    assert set(ours["headers"]) == set(theirs["headers"])
    for name in set(theirs["headers"]) - SENDER:
        assert ours["headers"][name] == theirs["headers"][name], name
    assert ours["headers"]["root_id"] == task_id == theirs["headers"]["root_id"]
    # The properties kombu's consumer and Celery's worker read, with their values.
    assert set(ours["properties"]) == set(theirs["properties"]) - CELERY_ONLY_PROPERTIES | {
        "reply_to"
    }
    for name in set(ours["properties"]) - {"delivery_tag", "reply_to"}:
        assert ours["properties"][name] == theirs["properties"][name], name
    assert ours["properties"]["delivery_info"] == {"exchange": "", "routing_key": QUEUE}
    assert ours["properties"]["priority"] == 0
    assert ours["properties"]["correlation_id"] == task_id
    assert isinstance(ours["properties"]["delivery_tag"], str)
    # The body: [args, kwargs, embed], base64-encoded JSON in both.
    assert body_of(ours) == body_of(theirs) == [[], CALL, body_of(theirs)[2]]


def test_celerys_consumer_reads_a_message_we_build_as_the_call_we_meant(broker: Broker) -> None:
    raw = built({TRACEPARENT: PARENT})
    sent = json.loads(raw)
    message = broker.received(raw)
    assert message.delivery_tag == sent["properties"]["delivery_tag"]
    assert (message.content_type, message.content_encoding) == ("application/json", "utf-8")
    assert message.payload[:2] == [[], CALL]
    assert message.headers[TRACEPARENT] == PARENT
    request = celery_request(broker, message)
    assert (request.name, request.id) == (TASK, sent["headers"]["id"])
    assert (request.args, request.kwargs) == ([], CALL)
    assert (request.argsrepr, request.kwargsrepr) == (ARGSREPR, KWARGSREPR)
    assert (request.root_id, request.parent_id) == (sent["headers"]["id"], None)
    assert request.eta is None and request.expires is None
    assert request.delivery_info == {
        "exchange": "",
        "routing_key": QUEUE,
        "priority": 0,
        "redelivered": False,
    }
    assert request.request_dict["retries"] == 0
    assert received_kwargs(message) == (CALL, QUEUE)


# Parsing: what Celery's producer sends is read by ours as Celery's worker reads it.


def test_a_message_celery_sends_is_read_by_ours_as_celerys_worker_reads_it(
    broker: Broker,
) -> None:
    raw = broker.sent(
        countdown=30, expires=600, retries=2, headers={TRACEPARENT: PARENT}, argsrepr=ARGSREPR
    )
    ours = decode(raw)
    message = broker.received(raw)
    request = celery_request(broker, message)
    assert ours.tag == message.delivery_tag == tag_of(raw)
    assert (ours.task, ours.task_id) == (request.name, request.id)
    assert (ours.args, ours.kwargs) == (list(request.args), request.kwargs) == ([], CALL)
    assert ours.retries == request.request_dict["retries"] == 2
    assert ours.eta() == request.eta and ours.eta() is not None
    assert ours.expires() == request.expires and ours.expires() is not None
    assert (ours.argsrepr, ours.kwargsrepr) == (request.argsrepr, request.kwargsrepr)
    assert (ours.root_id, ours.parent_id) == (request.root_id, request.parent_id)
    assert ours.headers[TRACEPARENT] == request.request_dict[TRACEPARENT] == PARENT
    for name in ("exchange", "routing_key"):
        assert ours.delivery_info[name] == request.delivery_info[name]
    for name in ("reply_to", "correlation_id"):
        assert ours.properties.get(name) == request.request_dict[name]
    assert task_kwargs(raw) == CALL


def requests_seen(task: Task[Any, Any], seen: list[dict[str, Any]]) -> None:
    """Record what `task` sees of its request when it runs, then retry it (as a tool
    whose call raised one of its `retry_on` exceptions)."""

    def run(call: dict[str, Any]) -> None:
        request = task.request
        fields = ["id", "retries", "hostname", "reply_to", "correlation_id", "root_id"]
        fields += ["parent_id", "eta", "expires", "argsrepr", "kwargsrepr", "origin"]
        fields += ["called_directly", "is_eager", "group", "chord", "chain", TRACEPARENT]
        fields += ["callbacks", "errbacks", "timelimit", "args", "kwargs", "task"]
        seen.append({name: getattr(request, name, None) for name in fields})
        seen[-1]["delivery_info"] = dict(request.delivery_info or {})
        raise task.retry(countdown=60)

    task.run = run  # type: ignore[method-assign]


def test_a_task_run_from_our_reading_sees_the_request_celerys_worker_gives_it(
    broker: Broker,
) -> None:
    task = registered(broker)
    seen: list[dict[str, Any]] = []
    requests_seen(task, seen)
    raw = built({TRACEPARENT: PARENT})
    # Celery's worker: kombu's consumer takes it, Celery's Request and tracer run it.
    message = broker.received(raw)
    request = celery_request(broker, message)
    args, kwargs, embed = message.payload
    traced = dict(request.request_dict)
    traced.update({"args": args, "kwargs": kwargs, "hostname": WORKER, "is_eager": False}, **embed)
    trace_task(task, request.id, args, kwargs, traced, app=broker.app, eager=False)
    celerys_retry = broker.client.rpop(QUEUE)
    # Ours: the same message, read by ours and run with the request we make of it.
    with pytest.raises(Exception, match="Retry in 60s"):
        run_as_request(task, decode(raw), WORKER, lambda: task.run(CALL))
    our_retry = broker.client.rpop(QUEUE)

    celerys, ours = seen
    celerys_info, our_info = celerys.pop("delivery_info"), ours.pop("delivery_info")
    assert ours == celerys
    assert ours["id"] == json.loads(raw)["headers"]["id"] and ours[TRACEPARENT] == PARENT
    # Celery's adds the priority and the redelivered flag (read by neither side's retry).
    assert (
        our_info
        == {k: celerys_info[k] for k in our_info}
        == {
            "exchange": "",
            "routing_key": QUEUE,
        }
    )
    # The retry each request sends: the same message (but for when it was sent, and the
    # parent: Celery's tracer also makes the running task the parent of what it sends).
    assert isinstance(celerys_retry, bytes) and isinstance(our_retry, bytes)
    theirs, mine = json.loads(celerys_retry), json.loads(our_retry)
    assert theirs["headers"]["parent_id"] == ours["id"] and mine["headers"]["parent_id"] is None
    for name in set(theirs["headers"]) - {"eta", "parent_id"}:
        assert mine["headers"][name] == theirs["headers"][name], name
    assert mine["headers"]["retries"] == 1
    for name in set(theirs["properties"]) - {"delivery_tag"}:
        assert mine["properties"][name] == theirs["properties"][name], name
    assert body_of(mine) == body_of(theirs)


# The unacknowledged set: a message taken by kombu's consumer and one taken by ours are
# recorded, swept back and acknowledged the same way.


def unacked(broker: Broker, tag: str) -> tuple[Any, float | None]:
    entry = broker.client.hget(layout.UNACKED_KEY, tag)
    return (None if entry is None else json.loads(entry)), broker.client.zscore(
        layout.UNACKED_INDEX_KEY, tag
    )


def test_a_message_taken_by_ours_is_recorded_as_kombus_consumer_records_one(
    broker: Broker,
) -> None:
    raws = [broker.sent(argsrepr=str(n)) for n in range(2)]
    broker.client.lpush(QUEUE, *raws)  # the first is taken first
    before = time.time()
    with broker.connection() as connection:
        kombus = Queue(QUEUE)(connection.default_channel).get(no_ack=False)
        assert kombus is not None
        batch = BrokerQueue(broker.client, QUEUE).take(1)
        [ours] = [decode(raw) for raw in batch.messages]
        kombu_entry, kombu_score = unacked(broker, str(kombus.delivery_tag))
        our_entry, our_score = unacked(broker, ours.tag)
        kombus.ack()
    assert kombus.delivery_tag == decode(raws[0]).tag and ours.tag == decode(raws[1]).tag
    # [message, exchange, routing key] under the delivery tag, scored by when it was taken.
    assert kombu_entry == [json.loads(raws[0]), "", QUEUE]
    assert our_entry == [json.loads(raws[1]), "", QUEUE]
    assert kombu_score is not None and our_score is not None
    assert before - 1 <= kombu_score <= time.time() and before - 1 <= our_score <= time.time()


def test_kombus_sweep_puts_back_what_either_took_as_a_redelivery_both_read(
    broker: Broker,
) -> None:
    raws = [broker.sent(argsrepr=str(n)) for n in range(2)]
    broker.client.lpush(QUEUE, *raws)
    # Visibility timeout 0: everything taken is past it at the next sweep.
    with broker.connection(visibility_timeout=0) as connection:
        channel: Any = connection.default_channel
        kombus = Queue(QUEUE)(channel).get(no_ack=False)
        assert kombus is not None
        [our_raw] = BrokerQueue(broker.client, QUEUE).take(1).messages
        channel.qos._delivered.clear()  # kombu's consumer is gone (it died holding it)
        restore_visible(connection)
    tags = [decode(raw).tag for raw in raws]
    assert [unacked(broker, tag) for tag in tags] == [(None, None)] * 2
    back = broker.client.lrange(QUEUE, 0, -1)
    assert sorted(decode(raw).tag for raw in back) == sorted(tags)
    for raw in back:
        assert decode(raw).delivery_info["redelivered"] is True
        message = broker.received(raw)
        broker.client.delete(QUEUE)
        assert celery_request(broker, message).delivery_info["redelivered"] is True
    assert decode(our_raw).task_id in {decode(raw).task_id for raw in back}


def test_our_ack_and_requeue_clear_what_either_consumer_took(broker: Broker) -> None:
    raws = [broker.sent(argsrepr=str(n)) for n in range(3)]
    broker.client.lpush(QUEUE, *raws)
    with broker.connection() as connection:
        channel: Any = connection.default_channel
        kombus = Queue(QUEUE)(channel).get(no_ack=False)
        assert kombus is not None
        kombu_tag = str(kombus.delivery_tag)
        taken = BrokerQueue(broker.client, QUEUE).take(2).messages
        ours = [decode(raw).tag for raw in taken]
        ack(broker.client, [kombu_tag, ours[0]])
        assert unacked(broker, kombu_tag) == (None, None)
        assert unacked(broker, ours[0]) == (None, None)
        # Put back as kombu's sweep puts one back: at the end taken next.
        broker.client.lpush(QUEUE, broker.sent(argsrepr="later"))
        restore(connection, ours[1])
        channel.qos._delivered.clear()  # acked by ours: kombu must not restore it
    assert unacked(broker, ours[1]) == (None, None)
    next_one = BrokerQueue(broker.client, QUEUE).take(1).messages
    assert [decode(raw).tag for raw in next_one] == [ours[1]]
    assert broker.client.hlen(layout.UNACKED_KEY) == 1  # the one just taken
