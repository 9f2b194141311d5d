"""An intake's task events for Flower: wanted as Celery's dispatcher says, kept with the
time they happened, published once per flush, once more on a new connection when the
one in use was lost; on Redis, made only while a client listens."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
from kombu.clocks import LamportClock

from toolfleet.workers.intake import events as intake_events
from toolfleet.workers.intake.events import TaskEvents, task_events_wanted


class Producer:
    """kombu's Producer as a flush uses it: publishes the body it is given, or raises when
    its connection is gone."""

    def __init__(self, broken: bool, published: list[list[dict[str, Any]]]) -> None:
        self.broken = broken
        self.published = published
        self.options: list[dict[str, Any]] = []

    def publish(self, body: bytes, **options: Any) -> None:
        if self.broken:
            raise ConnectionResetError("the broker closed the connection")
        self.published.append(json.loads(body))
        self.options.append(options)


class Dispatcher:
    """Celery's EventDispatcher as the intake uses it: its producer, exchange, headers
    and clock."""

    def __init__(self, broken: bool, published: list[list[dict[str, Any]]]) -> None:
        self.connection = SimpleNamespace(collect=lambda: None, release=lambda: None)
        self.producer = Producer(broken, published)
        self.exchange = SimpleNamespace(name="celeryev")
        self.hostname = "io@host"
        self.pid = 4242
        self.headers = {"hostname": "io@host"}
        self.delivery_mode = 1
        self.clock = LamportClock()
        self.closed = False

    def close(self) -> None:
        self.closed = True


class App:
    """What TaskEvents asks of a Celery app: a dispatcher per connection, each broken
    or not as `broken` says, in turn."""

    def __init__(self, *broken: bool) -> None:
        self.published: list[list[dict[str, Any]]] = []
        self.dispatchers: list[Dispatcher] = []
        self._broken = list(broken)
        self.events = SimpleNamespace(Dispatcher=self._dispatcher)

    def connection_for_write(self) -> object:
        return object()

    def _dispatcher(self, connection: object, **options: Any) -> Dispatcher:
        made = Dispatcher(self._broken.pop(0) if self._broken else False, self.published)
        self.dispatchers.append(made)
        return made


def events_of(app: App) -> TaskEvents:
    return TaskEvents(app, "io@host", lambda: True)  # type: ignore[arg-type]


class RedisChannel:
    """kombu's Redis channel as its fanout publish uses it: a client of its `Client`
    class per message, whose reply it drops."""

    def __init__(self, server: fakeredis.FakeServer) -> None:
        self.Client: type[fakeredis.FakeRedis] = fakeredis.FakeRedis
        self.server = server

    def put_fanout(self, body: bytes) -> None:
        self.Client(server=self.server).publish("/0.celeryev/task.multi", body)


class RedisApp(App):
    """An app whose dispatchers publish on a Redis channel too."""

    def __init__(self) -> None:
        super().__init__()
        self.server = fakeredis.FakeServer()

    def _dispatcher(self, connection: object, **options: Any) -> Dispatcher:
        made = super()._dispatcher(connection, **options)
        channel = RedisChannel(self.server)
        made.producer.channel = channel  # type: ignore[attr-defined]
        publish = made.producer.publish

        def publish_on_channel(body: bytes, **options: Any) -> None:
            publish(body, **options)
            channel.put_fanout(body)

        made.producer.publish = publish_on_channel  # type: ignore[method-assign]
        return made

    def monitor(self) -> Any:
        """A client subscribed as Flower's receiver is, to every event topic."""
        pubsub = fakeredis.FakeRedis(server=self.server).pubsub(ignore_subscribe_messages=True)
        pubsub.psubscribe("/0.celeryev/*")
        return pubsub


@pytest.mark.parametrize(
    ("enabled", "groups", "wanted"),
    [
        (True, set(), True),  # task events on (-E): the dispatcher sends every group
        (True, {"worker"}, False),  # off: heartbeats only, until a monitor asks
        (True, {"worker", "task"}, True),  # Celery's `enable_events` added the group
        (False, set(), False),  # no events at all (no heartbeats, no gossip, no -E)
    ],
)
def test_task_events_are_wanted_as_celerys_dispatcher_would_send_them(
    enabled: bool, groups: set[str], wanted: bool
) -> None:
    consumer = SimpleNamespace(event_dispatcher=SimpleNamespace(enabled=enabled, groups=groups))
    assert task_events_wanted(consumer) is wanted


def test_no_task_events_are_wanted_before_the_consumer_has_a_dispatcher() -> None:
    assert task_events_wanted(SimpleNamespace(event_dispatcher=None)) is False


def test_the_events_of_a_period_go_as_one_message_on_one_connection() -> None:
    app = App()
    events = events_of(app)
    events.send("task-received", uuid="t1", name="tool.x")
    events.send("task-started", uuid="t1")
    events.flush()
    events.flush()  # nothing kept: nothing published, no connection made
    events.send("task-succeeded", uuid="t1")
    events.flush()

    assert [[e["type"] for e in message] for message in app.published] == [
        ["task-received", "task-started"],
        ["task-succeeded"],
    ]
    assert len(app.dispatchers) == 1


def test_a_flush_on_a_lost_connection_publishes_the_same_events_on_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = App(True)  # the first connection is gone by the first flush
    events = events_of(app)
    monkeypatch.setattr(intake_events.time, "time", lambda: 1000.0)
    events.send("task-received", uuid="t1")
    monkeypatch.setattr(intake_events.time, "time", lambda: 1005.0)

    events.flush()

    ((event,),) = app.published
    assert event["uuid"] == "t1" and event["timestamp"] == 1000.0  # when it happened
    assert len(app.dispatchers) == 2 and app.dispatchers[0].closed


def test_events_are_dropped_only_when_a_new_connection_fails_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App(True, True)  # the broker is down
    events = events_of(app)
    events.send("task-received", uuid="t1")
    with caplog.at_level(logging.WARNING):
        events.flush()
    assert app.published == []
    assert "publishing 1 task events failed twice" in caplog.text

    events.send("task-received", uuid="t2")  # the broker is back
    events.flush()
    assert [[e["uuid"] for e in message] for message in app.published] == [["t2"]]


def test_closing_publishes_what_is_kept() -> None:
    app = App()
    events = events_of(app)
    events.send("task-succeeded", uuid="t1")
    events.close()
    assert [[e["uuid"] for e in message] for message in app.published] == [["t1"]]
    assert app.dispatchers[0].closed


def test_a_flush_publishes_the_events_as_celerys_dispatcher_would() -> None:
    app = App()
    events = events_of(app)
    events.send("task-received", uuid="t1", name="tool.x", args="{'a': 1}", timestamp=10.0)
    events.send("task-succeeded", uuid="t1", result="None", runtime=0.5, timestamp=11.0)
    events.flush()

    ((received, succeeded),) = app.published
    assert received == {
        "uuid": "t1",
        "name": "tool.x",
        "args": "{'a': 1}",
        "timestamp": 10.0,
        "hostname": "io@host",
        "utcoffset": received["utcoffset"],
        "pid": 4242,
        "clock": 1,
        "type": "task-received",
    }
    assert isinstance(received["utcoffset"], int | float)
    assert succeeded["type"] == "task-succeeded" and succeeded["clock"] == 2
    assert succeeded["runtime"] == 0.5
    (options,) = app.dispatchers[0].producer.options
    assert options["routing_key"] == "task.multi" and options["exchange"] == "celeryev"
    assert options["content_type"] == "application/json"
    assert options["headers"] == {"hostname": "io@host"}
    # The clock moved on by one per event: the next flush's first event follows.
    events.send("task-received", uuid="t2", name="tool.x", args="{}", timestamp=12.0)
    events.flush()
    assert [e["clock"] for e in app.published[-1]] == [3]
    assert app.dispatchers[0].clock.value == 3


def test_a_field_json_cannot_hold_goes_as_its_text() -> None:
    app = App()
    events = events_of(app)
    events.send("task-failed", uuid="t1", exception=ValueError("bad"))
    events.flush()
    ((failed,),) = app.published
    assert failed["exception"] == "bad"


def test_on_redis_events_go_unmade_once_a_publish_reached_nobody() -> None:
    app = RedisApp()
    events = events_of(app)
    made: list[str] = []

    def received(uuid: str) -> Callable[[], dict[str, Any]]:
        return lambda: made.append(uuid) or {"uuid": uuid}

    events.send_made("task-received", received("t1"))
    events.flush()  # no client subscribed: Redis dropped it
    events.send_made("task-received", received("t2"))
    events.flush()
    events.flush()  # nothing kept: nothing published

    assert made == ["t1"]  # made for the first publish only
    # After the first, an empty message asked whether anyone listens: nobody did.
    assert [[e["uuid"] for e in body] for body in app.published] == [["t1"], []]
    assert events.on  # the consumer still wants them: the intake keeps them, unmade


def test_on_redis_a_monitor_gets_every_event_of_the_flushes_after_it_subscribed() -> None:
    app = RedisApp()
    events = events_of(app)
    events.send("task-received", uuid="t1")
    events.flush()  # reached nobody

    monitor = app.monitor()
    events.send_made("task-received", lambda: {"uuid": "t2"})
    events.send("task-started", uuid="t2", timestamp=5.0)
    events.flush()

    # The subscription's confirmation reads as None (ignored); then the two messages.
    heard = [monitor.get_message() for _ in range(3)]
    bodies = [json.loads(m["data"]) for m in heard if m is not None]
    assert [[e["uuid"] for e in body] for body in bodies] == [[], ["t2", "t2"]]
    received, started = bodies[1]
    assert received["type"] == "task-received" and received["timestamp"] > 5.0  # stamped
    assert started["timestamp"] == 5.0  # as given

    events.send("task-succeeded", uuid="t2")
    events.flush()  # heard before: published at once
    assert [e["uuid"] for e in app.published[-1]] == ["t2"] and len(app.published) == 4

    monitor.close()  # gone: the next publish reaches nobody, the one after goes unmade
    for uuid in ("t3", "t4"):
        events.send_made("task-received", lambda uuid=uuid: {"uuid": uuid})
        events.flush()
    assert [[e["uuid"] for e in body] for body in app.published[4:]] == [["t3"], []]


def test_an_event_whose_fields_cannot_be_made_is_dropped_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App()
    events = events_of(app)

    def broken() -> dict[str, Any]:
        raise ValueError("no repr")

    events.send_made("task-received", broken)
    events.send("task-succeeded", uuid="t1")
    with caplog.at_level(logging.WARNING):
        events.flush()

    assert [[e["type"] for e in body] for body in app.published] == [["task-succeeded"]]
    assert "making the fields of a task-received event failed" in caplog.text


def test_a_broker_that_does_not_say_whom_it_reached_gets_every_event() -> None:
    app = App()  # its producer has no Redis channel (RabbitMQ)
    events = events_of(app)
    events.send("task-received", uuid="t1")
    events.flush()
    events.send_made("task-received", lambda: {"uuid": "t2"})
    events.flush()

    assert [[e["uuid"] for e in body] for body in app.published] == [["t1"], ["t2"]]
