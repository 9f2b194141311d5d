"""The worker's consumer sends Flower's task events in batches, at most every period."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import Celery
from celery.events.dispatcher import EventDispatcher
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection

from toolfleet.shared.celery_wire import consumer as consumer_module
from toolfleet.shared.celery_wire.consumer import TASK_EVENTS_PERIOD_S, Consumer


class FakeHub:
    """The timers a consumer set on its event loop; `fire` runs the due ones."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((delay, callback))

    def fire(self) -> None:
        timers, self.timers = self.timers, []
        for _, callback in timers:
            callback()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(consumer_module, "monotonic", clock)
    return clock


@pytest.fixture
def wired() -> Iterator[tuple[Consumer, FakeHub, list[list[dict[str, Any]]]]]:
    """A consumer with a fake event loop and Celery's own dispatcher on an in-memory
    broker, buffering the task group as a worker's does; the batches it published."""
    app = Celery("events-test", set_as_current=False)
    consumer = Consumer.__new__(Consumer)  # only its event handling: no broker, no pool
    hub = FakeHub()
    consumer.hub = hub  # type: ignore[assignment]
    published: list[list[dict[str, Any]]] = []
    with Connection("memory://") as connection:
        dispatcher = app.events.Dispatcher(
            connection,
            hostname="w1@test",
            buffer_group=["task"],
            on_send_buffered=consumer.on_send_event_buffered,
        )
        real_publish = dispatcher._publish

        def publish(event: Any, producer: Any, routing_key: str, **kwargs: Any) -> None:
            published.append(list(event) if isinstance(event, list) else [event])
            real_publish(event, producer, routing_key, **kwargs)

        dispatcher._publish = publish  # type: ignore[method-assign]
        consumer.event_dispatcher = dispatcher
        yield consumer, hub, published
        dispatcher.close()
    app.close()


def send(dispatcher: EventDispatcher | None, kind: str, task_id: str) -> None:
    assert dispatcher is not None
    dispatcher.send(kind, uuid=task_id)


def test_events_of_one_period_go_out_in_one_publish(
    wired: tuple[Consumer, FakeHub, list[list[dict[str, Any]]]], clock: Clock
) -> None:
    consumer, hub, published = wired
    for task_id in ("a", "b", "c"):
        for kind in ("task-received", "task-started", "task-succeeded"):
            send(consumer.event_dispatcher, kind, task_id)
    # Nine events, one timer, nothing sent before it fires.
    assert [delay for delay, _ in hub.timers] == [TASK_EVENTS_PERIOD_S]
    assert published == []
    hub.fire()
    assert len(published) == 1
    assert [(e["type"], e["uuid"]) for e in published[0]][:3] == [
        ("task-received", "a"),
        ("task-started", "a"),
        ("task-succeeded", "a"),
    ]
    assert len(published[0]) == 9
    # The next event starts the next period.
    clock.now += 0.5
    send(consumer.event_dispatcher, "task-received", "d")
    assert len(hub.timers) == 1
    hub.fire()
    assert [[e["uuid"] for e in batch] for batch in published] == [
        ["a", "a", "a", "b", "b", "b", "c", "c", "c"],
        ["d"],
    ]


def test_a_flush_whose_timer_was_lost_is_scheduled_again(
    wired: tuple[Consumer, FakeHub, list[list[dict[str, Any]]]], clock: Clock
) -> None:
    consumer, hub, published = wired
    send(consumer.event_dispatcher, "task-received", "a")
    hub.timers.clear()  # the loop dropped it
    clock.now += TASK_EVENTS_PERIOD_S / 2  # still due: no second timer
    send(consumer.event_dispatcher, "task-started", "a")
    assert hub.timers == []
    clock.now += TASK_EVENTS_PERIOD_S * 2  # overdue by more than a period: lost
    send(consumer.event_dispatcher, "task-succeeded", "a")
    assert len(hub.timers) == 1
    hub.fire()
    assert [[e["type"] for e in batch] for batch in published] == [
        ["task-received", "task-started", "task-succeeded"]
    ]


@pytest.mark.parametrize("method", ["stop", "shutdown"])
def test_stopping_sends_what_is_buffered_first(
    wired: tuple[Consumer, FakeHub, list[list[dict[str, Any]]]],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    consumer, _, published = wired
    sent_before_celery_stopped: list[int] = []
    monkeypatch.setattr(
        CeleryConsumer, method, lambda self: sent_before_celery_stopped.append(len(published))
    )
    send(consumer.event_dispatcher, "task-succeeded", "last")
    getattr(consumer, method)()
    assert sent_before_celery_stopped == [1]
    assert [e["uuid"] for e in published[0]] == ["last"]
