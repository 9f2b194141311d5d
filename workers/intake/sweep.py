"""The broker's sweep, run by every intake: kombu's own `restore_visible`, which puts the
messages of a dead worker back on their queues once the visibility timeout has passed.

Celery's consumer sweeps only while it consumes a queue; an io worker's queues are taken
by its intake, so the intake sweeps instead, on the same schedule and under kombu's lock.
"""

from __future__ import annotations

import logging
import threading

from celery import Celery

from toolfleet.shared.celery_wire.redis_queue import restore, restore_visible

log = logging.getLogger(__name__)


class Sweeper:
    """Runs kombu's sweep every `interval_s` on a channel of its own."""

    def __init__(self, app: Celery, interval_s: float) -> None:
        self._connection = app.connection_for_write()
        self._interval_s = interval_s
        self._lock = threading.Lock()  # a kombu channel is one thread's at a time
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolfleet-sweep", daemon=True)

    def start(self) -> None:
        """Sweep now, then every interval, from a thread of its own."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sweeping and close its connection."""
        self._stop.set()
        self._thread.join()
        self._connection.release()

    def requeue(self, tag: str) -> None:
        """Put the taken message `tag` back on its queue, where it is taken next."""
        with self._lock:
            restore(self._connection, tag)

    def _run(self) -> None:
        while True:  # at once, then every interval: a worker starting sweeps first
            try:
                with self._lock:
                    restore_visible(self._connection)
            except Exception:
                log.warning("the broker's sweep failed; trying again", exc_info=True)
            if self._stop.wait(self._interval_s):
                return
