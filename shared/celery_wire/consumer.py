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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from time import monotonic

from celery.events.dispatcher import EventDispatcher
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.asynchronous import Hub

log = logging.getLogger(__name__)

# How often buffered task events are published (an io worker's intake uses it too).
TASK_EVENTS_PERIOD_S = 0.1


class Consumer(CeleryConsumer):
    """Celery's consumer with its buffered task events flushed every TASK_EVENTS_PERIOD_S."""

    # Celery's consumer has these (celery-types does not declare them).
    hub: Hub | None
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


def consumer_class() -> str:
    """The worker_consumer setting that names `Consumer`."""
    return f"{Consumer.__module__}:{Consumer.__qualname__}"
