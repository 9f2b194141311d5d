"""A worker whose Celery consumer takes its calls keeps the messages it holds taken, as
the io intake does for those it holds (workers/intake/eta.py).

Celery's consumer holds a message due later (a job's `delay_s`, a retry's countdown) in
memory, unacknowledged until it runs. On Redis, kombu's sweep puts back every
unacknowledged message taken longer ago than the visibility timeout, whichever worker
holds it: a job delayed past it was delivered again on every sweep, and each copy ran
when due. Every KEEP_HELD_S this step scores the messages the consumer holds as taken
now, so the sweep takes back only those of a worker that stopped doing so: one that
died (or whose consumer is stuck).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, bootsteps
from kombu.transport.redis import Channel as RedisChannel

log = logging.getLogger(__name__)

# How often the held messages are scored anew: well within any visibility timeout.
KEEP_HELD_S = 1.0


def held_tags(channel: Any) -> list[str]:
    """The delivery tags the consumer's kombu `channel` holds unacknowledged (those acked
    and not yet flushed left out)."""
    qos = channel.qos
    acked = qos._dirty
    return [tag for tag in list(qos._delivered) if tag not in acked]


def keep_held(consumer: Any) -> None:
    """Score the messages `consumer` (Celery's) holds as taken now, on Redis; nothing on
    another broker, which takes a message back only from a connection that closed."""
    channel = getattr(consumer.task_consumer, "channel", None)
    if not isinstance(channel, RedisChannel):
        return
    tags = held_tags(channel)
    if not tags:
        return
    try:
        with channel.conn_or_acquire() as client:
            # XX: only those still unacknowledged (an ack may have flushed meanwhile).
            client.zadd(channel.unacked_index_key, dict.fromkeys(tags, time.time()), xx=True)
    except Exception:  # the next round tries again, well within the timeout
        log.warning("could not keep %d held messages taken; trying again", len(tags))


class KeepHeldMessages(bootsteps.StartStopStep):
    """Runs `keep_held` every KEEP_HELD_S on the consumer's timer."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._repeating: Any = None

    def start(self, parent: Any) -> None:
        """Begin keeping the held messages, on the consumer's timer."""
        self._repeating = parent.timer.call_repeatedly(KEEP_HELD_S, keep_held, (parent,))

    def stop(self, parent: Any) -> None:
        """Stop keeping them (what is still held is swept back after the timeout)."""
        if self._repeating is not None:
            self._repeating.cancel()
            self._repeating = None


def install_keeping(app: Celery) -> None:
    """Keep the messages `app`'s worker consumer holds taken while it lives."""
    app.steps["consumer"].add(KeepHeldMessages)
