"""The worker's Celery consumer, sending Flower's task events in batches.

Celery's consumer buffers task events and flushes the buffer on the next turn of its event
loop. A prefork worker's calls pass through that loop three times each (received, started,
succeeded), so each call cost three PUBLISH round trips on the main process - the process
every call's hand-offs go through. In the throughput bench (one worker process, no-op
calls) that was a quarter of the worker's CPU samples (bench/RESULTS.md). This consumer
flushes at most every TASK_EVENTS_PERIOD_S, as an io worker's intake does: under load one
PUBLISH carries the events of every call of that period, and Flower sees a task's state
change at most that much later.

Only the consumer's own thread flushes: the dispatcher's buffer has no size limit. With
Celery's limit, the thread whose event fills the buffer publishes it - on a threads pool,
a pool thread. On RabbitMQ that publish waits for its confirm on the events connection,
whose frames the consumer's event loop reads too (for heartbeats): the confirm could be
read there, the pool thread then waited forever holding the dispatcher's lock, and every
other thread's event, the timed flush included, waited behind it: the worker took no
more calls.

It also tries the broker again sooner once it lost it. Celery's consumer leaves kombu's
schedule as it is (tries 2, 6, 12, 20, 30, 42 s after the loss: each wait 2 s longer, up
to 30 s), and Celery's settings cannot change it (kombu's interval transport options
reach only its other retries): a worker whose Redis came back, or whose Sentinel had
promoted a replica, sat idle until its next try - about 10 s after a promotion with
Sentinel's default down-after-milliseconds (30 s), up to 30 s in a long outage. Here
it tries RECONNECT_START_S after the loss, then each wait RECONNECT_STEP_S longer, up
to RECONNECT_MAX_S: it takes calls again at most that long after the broker is back,
for one connection attempt per try.

And a message of a task the worker does not know is dropped only after Celery's
`task_unknown` signal, by whoever takes its call on. Celery drops it first: a receiver
that hands the call on to another worker (workers/handoff.py publishes a copy a moment
later) would lose it if this worker were killed in between. Here the signal carries `end`,
what drops the message on the consumer's own thread (a broker channel belongs to the
thread that consumes from it); a receiver that returns True calls it once the copy is
out, and the message is dropped at once otherwise. Killed in between, the worker leaves
the message unacknowledged, and the broker delivers it again.

On RabbitMQ, a message whose basic properties py-amqp cannot read (a `content_type` that
is not UTF-8, which any client of the vhost may publish) made py-amqp raise reading its
header: the consumer dropped the connection, connected again, was delivered the same
message first, and raised outside its loop's error handling, which ended the worker (and
every restart of it). The consumer's connection has py-amqp's frame handler wrapped
(`mark_unreadable_properties`, as the io intake's): such a message arrives marked, and is
dropped, logged, before Celery reads it as a task.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import partial
from time import monotonic
from typing import Any

import amqp
from celery import signals
from celery.events.dispatcher import EventDispatcher
from celery.exceptions import NotRegistered
from celery.utils.objects import Bunch
from celery.worker.consumer import Consumer as CeleryConsumer

# celery-types does not declare Celery's template of its log line.
from celery.worker.consumer.consumer import UNKNOWN_TASK_ERROR, dump_body  # type: ignore[attr-defined]
from kombu import Connection
from kombu.asynchronous import Hub

from toolfleet.shared.celery_wire.rabbitmq import mark_unreadable_properties, unreadable_properties

log = logging.getLogger(__name__)

# How often buffered task events are published (an io worker's intake uses it too).
TASK_EVENTS_PERIOD_S = 0.1

# After losing the broker: the first try again, how much longer each next wait is, and the
# longest wait between two tries (s): tries 0.5, 1.5, 3, 5, 7... s after the loss.
RECONNECT_START_S = 0.5
RECONNECT_STEP_S = 0.5
RECONNECT_MAX_S = 2.0

# A worker event published with retries (Celery's worker heartbeats are) is tried again on
# at most this many new connections once its own is lost; then the error reaches the
# consumer's loop, which starts over on new connections. kombu would retry forever, and
# where RabbitMQ had closed the connections of a worker that went silent (heartbeats), it
# declared the events exchange on the lost channel each time: the worker, running again,
# opened a connection every few milliseconds and took no calls.
EVENT_PUBLISH_RETRIES = 2


class Consumer(CeleryConsumer):
    """Celery's consumer with its buffered task events flushed every TASK_EVENTS_PERIOD_S."""

    # Celery's consumer has these (celery-types does not declare them).
    hub: Hub | None
    connection_errors: tuple[type[BaseException], ...]
    _flush_events: Callable[[], None]  # flushes the dispatcher's buffer, if it has one
    _event_dispatcher: EventDispatcher | None = None
    # When the scheduled flush is due (monotonic clock); None: none is scheduled.
    _events_flush_due: float | None = None

    @property
    def event_dispatcher(self) -> EventDispatcher | None:
        """The task events' dispatcher (Celery's events step sets it)."""
        return self._event_dispatcher

    @event_dispatcher.setter
    def event_dispatcher(self, dispatcher: EventDispatcher | None) -> None:
        if dispatcher is not None:  # flushed by this consumer's timer only (see above)
            dispatcher.buffer_limit = math.inf  # type: ignore[attr-defined, unused-ignore]
        self._event_dispatcher = dispatcher

    # celery-types declares a Callable return; Celery's own returns None.
    def on_send_event_buffered(self) -> None:  # type: ignore[override]
        """A task event was buffered: flush within TASK_EVENTS_PERIOD_S."""
        if not self.hub:
            return
        now = monotonic()
        due = self._events_flush_due
        # A flush overdue by a whole period never ran (its timer was lost): schedule anew.
        if due is None or now > due + TASK_EVENTS_PERIOD_S:
            self._events_flush_due = now + TASK_EVENTS_PERIOD_S
            self.hub.call_later(TASK_EVENTS_PERIOD_S, self._flush_scheduled_events)

    def _flush_scheduled_events(self) -> None:
        self._events_flush_due = None
        self._flush_events()

    # celery-types declares no return; Celery's returns None.
    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        """Celery's (logged, the backend and Flower told the task failed, `task_unknown`
        sent), the message dropped after the signal: by the receiver that returns True,
        through the signal's `end`, or here. Without an event loop to drop it on later,
        it is dropped first, as Celery does."""
        headers = message.headers or {}
        id_: Any = headers.get("id")
        name: Any = headers.get("task")
        if id_ is None or name is None:  # protocol 1: in the body
            payload = _payload(message)
            id_, name = id_ or payload.get("id"), name or payload.get("task")
        # Celery's own words (operators search for them), its body's dump included.
        info = (dump_body(message, body), message.headers, message.delivery_info)
        log.error(UNKNOWN_TASK_ERROR, exc, *info, exc_info=exc)
        drop = partial(message.reject_log_error, log, self.connection_errors)
        hub = self.hub
        end = None if hub is None else partial(hub.call_soon, partial(_dropping, drop, id_))
        if end is None:
            drop()
        taken_on = False
        try:
            request = Bunch(
                name=name,
                chord=None,
                root_id=headers.get("root_id"),
                correlation_id=message.properties.get("correlation_id"),
                reply_to=message.properties.get("reply_to"),
                errbacks=None,
            )
            self.app.backend.mark_as_failure(id_, NotRegistered(name), request=request)
            if self.event_dispatcher:
                failed = f"NotRegistered({name!r})"
                self.event_dispatcher.send("task-failed", uuid=id_, exception=failed)
            replies = signals.task_unknown.send(
                sender=self, message=message, exc=exc, name=name, id=id_, end=end
            )
            taken_on = any(reply is True for _, reply in replies)
        finally:
            if end is not None and not taken_on:  # dropped, even where this raised
                drop()

    def connection_for_read(self, heartbeat: float | None = None) -> Connection:
        """Celery's (what the consumer takes messages on), a message whose properties
        py-amqp cannot read marked rather than raised on, on RabbitMQ."""
        conn = super().connection_for_read(heartbeat=heartbeat)
        if isinstance(conn.connection, amqp.Connection):  # py-amqp: RabbitMQ
            mark_unreadable_properties(conn)
        return conn

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        """Celery's handler of the consumer's messages, a message marked unreadable
        (`connection_for_read`) dropped first: it holds no task, and Celery would read
        its body as a task's without its content type."""
        on_task_received = super().create_task_handler(*args, **kwargs)

        def on_message(message: Any) -> Any:
            reason = unreadable_properties(message.headers)
            if reason is None:
                return on_task_received(message)
            # The io intake's words (operators search for them).
            log.error(
                "dropped a message whose properties could not be read (%s) (starts %r)",
                reason,
                message.body[:200],
            )
            # No dead-letter exchange: a reject without requeue ends it, as Celery's
            # own drop of an unknown message does.
            message.reject_log_error(log, self.connection_errors)
            return None

        return on_message

    def ensure_connected(self, conn: Connection) -> Connection:
        """Celery's, trying the broker again on RECONNECT_* rather than kombu's defaults
        (the consumer's connection and its task events' both come through here)."""
        return super().ensure_connected(_reconnecting_sooner(conn))

    def connection_for_write(self, url: str | None = None, heartbeat: float | None = None) -> Any:
        """Celery's (task events' connection), retrying a publish EVENT_PUBLISH_RETRIES
        times at most."""
        conn: Connection = super().connection_for_write(url=url, heartbeat=heartbeat)
        return _retrying_at_most(conn, EVENT_PUBLISH_RETRIES)

    def stop(self) -> None:
        """Flush the buffered task events, then stop as Celery's consumer does."""
        self._flush_pending_events()
        super().stop()

    def shutdown(self) -> None:
        """Flush the buffered task events, then shut down as Celery's consumer does."""
        self._flush_pending_events()
        super().shutdown()

    def _flush_pending_events(self) -> None:
        """Send what is buffered before the dispatcher closes: a stopping worker's last
        calls still reach Flower."""
        try:
            self._flush_events()
        except Exception:
            log.warning("sending the last task events failed", exc_info=True)


def _payload(message: Any) -> dict[str, Any]:
    """A protocol 1 message's decoded body; empty where it is no such body (a message
    forged on the broker must not stop the consumer before it is dropped)."""
    try:
        payload = message.payload
    except Exception:
        return {}
    return payload if isinstance(payload, dict) else {}


def _dropping(drop: Callable[[], None], task_id: object) -> None:
    """Drop a message on the consumer's loop, later than it came: an error is logged, not
    raised into the loop (the channel it came on may be gone since, and the broker gives
    the message back)."""
    try:
        drop()
    except Exception:
        log.exception("could not drop the message of unregistered task id %s", task_id)


def _reconnecting_sooner(conn: Connection) -> Connection:
    """`conn`, its `ensure_connection` retrying on RECONNECT_* unless told otherwise:
    Celery's consumer passes no intervals to it."""
    ensure = conn.ensure_connection

    def ensure_connection(*args: Any, **kwargs: Any) -> Connection:
        kwargs.setdefault("interval_start", RECONNECT_START_S)
        kwargs.setdefault("interval_step", RECONNECT_STEP_S)
        kwargs.setdefault("interval_max", RECONNECT_MAX_S)
        return ensure(*args, **kwargs)

    conn.ensure_connection = ensure_connection  # type: ignore[method-assign]
    return conn


def _retrying_at_most(conn: Connection, retries: int) -> Connection:
    """`conn`, its `ensure` (what publishes with retries go through) giving up after
    `retries` new connections where its caller set no bound."""
    ensure = conn.ensure

    def bounded(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("max_retries") is None:
            kwargs["max_retries"] = retries
        return ensure(*args, **kwargs)

    conn.ensure = bounded  # type: ignore[method-assign]
    return conn


def consumer_class() -> str:
    """The worker_consumer setting that names `Consumer`."""
    return f"{Consumer.__module__}:{Consumer.__qualname__}"
