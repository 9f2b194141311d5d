"""Flower's task events of an intake: buffered, and published from one thread every
TASK_EVENTS_PERIOD_S on a connection of their own, made anew after it fails.

Celery's dispatcher never reconnects: once its connection dropped (RabbitMQ restarted,
or closed it) every publish fails, and it keeps what failed to publish again, without
bound. Celery's consumer makes a new dispatcher when it reconnects. The intake keeps the
events of a period itself, each stamped when it happened: a flush that fails publishes
them once more on a new connection at once (a dropped connection loses nothing), and
drops them only when that fails too (the broker is down: Flower's view is not worth
holding memory for).

They are sent while the worker's consumer wants them, as Celery's dispatcher decides:
from the start with task events on (`worker_send_task_events`, `-E`), else once a
monitor asked (Celery's `enable_events` control command, which Flower sends every few
seconds), until `disable_events`.

On Redis an event's fields are made only when someone listens. Redis's
publish-subscribe keeps nothing - an event published while no client is subscribed is
gone - and each publish answers how many clients it reached. Once a publish reached none,
a flush first publishes an empty message (a monitor takes it for no event): only if that
reached a client are the period's events made and published, else they are dropped
unmade. A monitor subscribed before a flush gets every event of it; one that is not
would not have got them anyway. A broker that does not say (RabbitMQ) gets every event.

A flush publishes the events as the dispatcher's buffered group would (one `task.multi`
message on its exchange, each event with the dispatcher's hostname, pid, UTC offset and
clock), but encodes them itself, at once: the dispatcher's per-event send and kombu's
JSON encoder took a sixth of an io worker's CPU in a wide turn.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from celery import Celery
from celery.utils.time import utcoffset
from kombu import Connection, Exchange, Producer
from kombu.clocks import LamportClock
from pydantic_core import to_json
from redis import Redis

log = logging.getLogger(__name__)

# The routing key of a message of task events: the dispatcher's buffered "task" group.
TASK_GROUP_KEY = "task.multi"
# Events kept at most between two flushes; more are dropped (the broker is unreachable,
# or the flush thread starved): the timed flush comes first under any load an io worker
# takes.
BUFFER_LIMIT = 10_000


class Dispatcher(Protocol):
    """What a flush uses of Celery's EventDispatcher: its producer on the event exchange,
    the sender it names and its clock."""

    hostname: str
    pid: int
    headers: dict[str, Any]
    delivery_mode: int
    exchange: Exchange
    producer: Producer
    clock: LamportClock
    connection: Connection | None

    def close(self) -> None:
        """Close its producer."""


def task_events_wanted(consumer: Any) -> bool:
    """Whether Celery's worker `consumer` sends task events now: its event dispatcher is
    on and sends the task group (no groups named: every group)."""
    dispatcher = getattr(consumer, "event_dispatcher", None)
    if dispatcher is None or not dispatcher.enabled:
        return False
    groups = dispatcher.groups
    return not groups or "task" in groups


class TaskEvents:
    """The task events of worker `hostname` of `app`, sent while `wanted()` says so."""

    def __init__(self, app: Celery, hostname: str, wanted: Callable[[], bool]) -> None:
        self._app = app
        self._hostname = hostname
        self._wanted = wanted
        self._dispatcher: Dispatcher | None = None  # opened by the first flush
        self._lock = threading.Lock()  # intake threads send, the flush thread takes
        self._pending: list[_Kept] = []
        self._reach: _Reach | None = None  # the clients each publish reached (Redis)
        self._heard = True  # the last publish reached a client, or the broker does not say

    @property
    def on(self) -> bool:
        """Whether events are wanted now (a sender checks before it makes one)."""
        return self._wanted()

    def send(self, kind: str, **fields: Any) -> None:
        """Keep an event, stamped now, for the next flush."""
        self._keep(kind, time.time(), fields)

    def send_made(self, kind: str, make: Callable[[], dict[str, Any]]) -> None:
        """Keep an event, stamped now, whose fields `make` gives when a flush publishes
        it (never, while nobody listens)."""
        self._keep(kind, time.time(), make)

    def flush(self) -> None:
        """Publish the events kept (one thread's job): on the connection in use, else, or
        when that fails, on a new one. After a publish that reached nobody, only once an
        empty message reached someone."""
        with self._lock:
            kept, self._pending = self._pending, []
        if not kept:
            return
        if not self._heard and (not self._sent([]) or not self._heard):
            return  # nobody listens: the events go unmade
        self._sent([made for each in kept if (made := _made(each)) is not None])

    def _keep(self, kind: str, stamp: float, fields: _Fields) -> None:
        with self._lock:
            if len(self._pending) < BUFFER_LIMIT:
                self._pending.append((kind, stamp, fields))

    def _sent(self, events: list[tuple[str, dict[str, Any]]]) -> bool:
        """Whether `events` were published, on the connection in use or a new one."""
        if self._publish(events) or self._publish(events):
            return True
        log.warning(
            "publishing %d task events failed twice, on a new connection too: they are "
            "lost, and the next ones go on a new connection",
            len(events),
        )
        return False

    def close(self) -> None:
        """Publish what is kept and close."""
        self.flush()
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            _discard(dispatcher, lost=False)

    def _publish(self, events: list[tuple[str, dict[str, Any]]]) -> bool:
        """Whether `events` were published, as one message; after a failure the
        connection is given up (the next publish opens a new one)."""
        dispatcher = self._dispatcher
        if dispatcher is None:
            dispatcher = self._dispatcher = self._open()
        try:
            if self._reach is None:  # the producer's channel connects: inside the try
                self._reach = _Reach.of(dispatcher.producer)
            self._reach.reached = None
            exchange = dispatcher.exchange
            dispatcher.producer.publish(
                _encoded(dispatcher, events),
                routing_key=TASK_GROUP_KEY,
                exchange=exchange.name,
                declare=[exchange],
                content_type="application/json",
                content_encoding="utf-8",
                headers=dispatcher.headers,
                delivery_mode=dispatcher.delivery_mode,
            )
            self._heard = self._reach.reached != 0
            return True
        except Exception:
            log.info("publishing task events failed", exc_info=True)
            self._dispatcher = self._reach = None
            _discard(dispatcher, lost=True)
            return False

    def _open(self) -> Dispatcher:
        # Connecting is lazy: a broker that is down fails the first flush, not this.
        dispatcher = self._app.events.Dispatcher(
            self._app.connection_for_write(), hostname=self._hostname, groups=["task"]
        )
        return cast(Dispatcher, dispatcher)


# The fields of a kept event, or what makes them.
_Fields = dict[str, Any] | Callable[[], dict[str, Any]]
# A kept event: its type, when it happened, its fields.
_Kept = tuple[str, float, _Fields]


def _made(kept: _Kept) -> tuple[str, dict[str, Any]] | None:
    """A kept event's type and fields, stamped when it happened (Celery's Event keeps a
    timestamp given in the fields); None, logged, when its fields could not be made."""
    kind, stamp, fields = kept
    try:
        made = fields() if callable(fields) else fields
    except Exception:  # Flower's view is not worth the flush of the others
        log.warning("making the fields of a %s event failed", kind, exc_info=True)
        return None
    made.setdefault("timestamp", stamp)
    return kind, made


class _Reach:
    """How many clients the last publish on a producer's channel reached: None where the
    broker does not say."""

    def __init__(self) -> None:
        self.reached: int | None = None

    @classmethod
    def of(cls, producer: Producer) -> _Reach:
        """The reach of `producer`'s publishes. On kombu's Redis channel, whose fanout
        publish makes a client of its `Client` class for each message and drops the
        reply, that class is made to keep the reply."""
        reach = cls()
        channel: Any = getattr(producer, "channel", None)  # kombu's channel, untyped
        client_class = getattr(channel, "Client", None)
        if isinstance(client_class, type) and issubclass(client_class, Redis):

            class Counting(client_class):  # type: ignore[valid-type,misc]
                def publish(self, channel: Any, message: Any, **kwargs: Any) -> Any:
                    reached = super().publish(channel, message, **kwargs)
                    if isinstance(reached, int):  # several topics: reached if any one was
                        reach.reached = max(reach.reached or 0, reached)
                    return reached

            channel.Client = Counting
        return reach


def _encoded(dispatcher: Dispatcher, events: list[tuple[str, dict[str, Any]]]) -> bytes:
    """`events` as the JSON body of one message, each as the dispatcher's `send` makes
    it (celery.events.Event): its fields, its type, the sender and the clock."""
    sender = {"hostname": dispatcher.hostname, "utcoffset": utcoffset(), "pid": dispatcher.pid}
    clock = dispatcher.clock
    with clock.mutex:  # the clock forwarded once for all, as `forward` would be for each
        first = clock.value + 1
        clock.value += len(events)
    wire = [
        {**fields, **sender, "clock": first + i, "type": kind}
        for i, (kind, fields) in enumerate(events)
    ]
    # A field Celery's JSON would refuse goes as its text rather than losing the message.
    return to_json(wire, fallback=str)


def _discard(dispatcher: Dispatcher, *, lost: bool) -> None:
    """Close `dispatcher` and its connection (one that was `lost` without a word to the
    broker, which may not answer)."""
    with contextlib.suppress(Exception):
        dispatcher.close()
    connection = dispatcher.connection
    if connection is not None:
        with contextlib.suppress(Exception):
            connection.collect() if lost else connection.release()
