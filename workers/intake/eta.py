"""Messages that may not run yet (a retry's countdown), held until their ETA.

A held message keeps its slot, as Celery keeps a reserved message, but no thread: the
few threads that admit coroutine calls must never sleep through a countdown.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from toolfleet.shared.celery_wire.parse import TaskMessage


class EtaQueue:
    """Holds messages until their ETA, then hands each to `due` (from its own thread)."""

    def __init__(self, due: Callable[[TaskMessage], None]) -> None:
        self._due = due
        self._held: list[tuple[datetime, int, TaskMessage]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="toolfleet-eta", daemon=True)

    def start(self) -> None:
        """Start handing messages over as they come due."""
        self._thread.start()

    def hold(self, message: TaskMessage, eta: datetime) -> None:
        """Hand `message` to `due` at `eta`."""
        with self._changed:
            heapq.heappush(self._held, (eta, next(self._order), message))
            self._changed.notify()

    def stop(self) -> list[TaskMessage]:
        """Stop; the messages still held, which never ran."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join()
        held = [message for _, _, message in self._held]
        self._held.clear()
        return held

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopping and not self._ready():
                    self._changed.wait(self._wait_s())
                if self._stopping:
                    return
                _, _, message = heapq.heappop(self._held)
            self._due(message)

    def _ready(self) -> bool:
        return bool(self._held) and self._held[0][0] <= datetime.now(UTC)

    def _wait_s(self) -> float | None:
        if not self._held:
            return None
        return max((self._held[0][0] - datetime.now(UTC)).total_seconds(), 0.0)
