"""The intake's side of the broker: whether the server can serve it, and acknowledgements
sent in batches (the messages' layout is kombu's: shared.celery_wire.redis_queue)."""

from __future__ import annotations

import logging
import threading
import time

import redis

from toolfleet.shared.celery_wire.redis_queue import ack

log = logging.getLogger(__name__)

# BLMOVE, with which a taker waits for a message without popping it, came in Redis 6.2.
MIN_REDIS = (6, 2)


def supports_intake(client: redis.Redis) -> bool:
    """Whether the server has what the intake needs (Redis 6.2 or later, or Valkey)."""
    version = str(client.info("server").get("redis_version", "0"))
    return tuple(int(part) for part in version.split(".")[:2]) >= MIN_REDIS


class Acks:
    """Acknowledgements, sent in batches: one round trip removes every tag acked since the
    last one from kombu's unacknowledged set."""

    def __init__(self, client: redis.Redis, period_s: float = 0.005) -> None:
        self._client = client
        self._period_s = period_s
        self._tags: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="toolfleet-acks", daemon=True)

    def start(self) -> None:
        """Start sending acks from a thread of its own."""
        self._thread.start()

    def ack(self, tag: str) -> None:
        """Acknowledge `tag` within about `period_s`."""
        with self._lock:
            self._tags.append(tag)
        self._wake.set()

    def flush(self) -> None:
        """Send the acks gathered so far."""
        with self._lock:
            tags, self._tags = self._tags, []
        if tags:
            ack(self._client, tags)

    def stop(self) -> None:
        """Send what is left and stop."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait()
            self._wake.clear()
            time.sleep(self._period_s)  # gather the acks of calls ending together
            try:
                self.flush()
            except redis.RedisError:
                # Unacked, the messages are redelivered after the visibility timeout and
                # found closed (answered): nothing runs twice.
                log.warning(
                    "acknowledging finished calls failed; they are redelivered after the "
                    "visibility timeout and found answered",
                    exc_info=True,
                )
