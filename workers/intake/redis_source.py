"""The intake's source on Redis: kombu's lists, a taker per queue, acks in batches and
the broker's sweep (shared.celery_wire.redis_queue keeps kombu's layout)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import redis
from celery import Celery

from toolfleet.shared.celery_wire.parse import MalformedMessage, TaskMessage, decode
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue, keep_taken
from toolfleet.shared.outages import resilient_client
from toolfleet.workers.intake.broker import Acks
from toolfleet.workers.intake.source import Dropped, Taken, Taker
from toolfleet.workers.intake.sweep import Sweeper
from toolfleet.workers.intake.unblocking import UnblockableWaits

log = logging.getLogger(__name__)


class RedisTaker:
    """Takes one queue's messages in batches, with one script call per take."""

    def __init__(
        self, client: redis.Redis, queue: str, stopping: threading.Event, waits: UnblockableWaits
    ) -> None:
        self.name = queue
        self._queue = BrokerQueue(client, queue)
        self._stopping = stopping
        self._waits = waits  # where it blocks while the queue is empty; cut when it stops

    def take(self, limit: int) -> Taken:
        """Up to `limit` messages, each recorded as kombu's unacknowledged now."""
        try:
            batch = self._queue.take(limit)
        except redis.RedisError:
            log.warning("taking messages from %s failed; trying again", self.name, exc_info=True)
            return Taken()
        taken = Taken()
        for raw in batch.malformed:
            reason = f"a message that is not kombu's JSON from {self.name}"
            taken.dropped.append(Dropped(reason, raw, None))
        for raw, tag in zip(batch.messages, batch.tags, strict=True):
            message = _read(raw, tag, taken)
            if message is not None:
                taken.messages.append(message)
        return taken

    def wait(self, timeout_s: float) -> None:
        """Block until the queue has a message, or `timeout_s` passes."""
        seconds = max(1, round(timeout_s))
        try:
            self._waits.run(lambda client: self._queue.wait(seconds, on=client))
        except redis.RedisError:
            log.warning("waiting on %s failed; trying again", self.name, exc_info=True)
            self._stopping.wait(timeout_s)


def _read(raw: bytes, tag: str, taken: Taken) -> TaskMessage | None:
    """The message in `raw`, taken under `tag`; or None, `raw` added to what `taken`
    dropped, to be acknowledged by that tag (the one its record is under)."""
    try:
        message = decode(raw)
    except MalformedMessage as exc:
        taken.dropped.append(Dropped(f"a malformed message: {exc}", raw, tag))
        return None
    except Exception as exc:
        reason = f"a message that could not be read: {exc!r}"
        taken.dropped.append(Dropped(reason, raw, tag))
        return None
    if message.tag != tag:  # a delivery tag given twice: not a message kombu wrote
        reason = f"a message whose delivery tag reads {message.tag!r} and {tag!r}"
        taken.dropped.append(Dropped(f"a malformed message: {reason}", raw, tag))
        return None
    return message


class RedisSource:
    """`queues` on the Redis at `url`, swept every `restore_interval_s` for the messages
    of workers that died (kombu's sweep, as Celery's consumer runs it)."""

    def __init__(
        self, app: Celery, url: str, queues: Sequence[str], restore_interval_s: float
    ) -> None:
        self._client = resilient_client(url)
        self._stopping = threading.Event()
        self._waits = [UnblockableWaits(url, self._client) for _ in queues]
        self._takers: list[Taker] = [
            RedisTaker(self._client, q, self._stopping, waits)
            for q, waits in zip(queues, self._waits, strict=True)
        ]
        self._acks = Acks(self._client)
        self._sweeper = Sweeper(app, restore_interval_s)

    @property
    def takers(self) -> list[Taker]:
        """A taker per queue."""
        return self._takers

    def start(self) -> None:
        """Start acknowledging and sweeping."""
        self._acks.start()
        self._sweeper.start()

    def ack(self, tag: str) -> None:
        """Acknowledge `tag` with the others of the next few milliseconds."""
        self._acks.ack(tag)

    def requeue(self, tag: str) -> None:
        """Put the taken message `tag` back on its queue, where it is taken next."""
        self._sweeper.requeue(tag)

    def keep(self, tags: Sequence[str]) -> None:
        """Score the messages `tags` as taken now in kombu's unacknowledged index (those
        still there): the sweep restores a message scored past the visibility timeout."""
        try:
            keep_taken(self._client, tags)
        except redis.RedisError:
            log.warning("could not keep %d held messages taken; trying again", len(tags))

    def holds(self, tag: str) -> bool:
        """Always: only the sweep takes a message back, past the visibility timeout."""
        return True

    def stop_taking(self) -> None:
        """Nothing is received before it is taken here: the takers' waits end at once."""
        self._stopping.set()
        for waits in self._waits:
            waits.cut()

    def stop(self) -> None:
        """Send the acks made so far, stop sweeping."""
        self._stopping.set()
        self._acks.stop()
        self._sweeper.stop()
        for waits in self._waits:
            waits.close()
