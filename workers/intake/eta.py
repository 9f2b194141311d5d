"""Messages that may not run yet (a retry's countdown), held until their ETA.

A held message keeps its slot, as Celery keeps a reserved message, but no thread: the
few threads that admit coroutine calls must never sleep through a countdown. While any
is held, the broker is told each second that they are still taken (`keep`): an ETA
past the broker's visibility timeout must not have the message delivered again to
another worker, which would run it at the ETA too.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from toolfleet.shared.celery_wire.parse import TaskMessage

# How often the held messages are kept taken: well within any visibility timeout.
KEEP_EVERY_S = 1.0


class EtaQueue:
    """Holds messages until their ETA, then hands each to `due` (from its own thread)."""

    def __init__(
        self,
        due: Callable[[TaskMessage], None],
        keep: Callable[[Sequence[str]], None] = lambda tags: None,
    ) -> None:
        self._due = due
        self._keep = keep  # tells the broker the messages of these tags are still taken
        self._kept_at = time.monotonic()
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
            if not self._held:
                self._kept_at = time.monotonic()  # taken just now: kept from now on
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
                while not self._stopping and not self._ready() and not self._keeping_due():
                    self._changed.wait(self._wait_s())
                if self._stopping:
                    return
                due = heapq.heappop(self._held)[2] if self._ready() else None
                keeping = [m.tag for _, _, m in self._held] if self._keeping_due() else []
            if keeping:
                self._kept_at = time.monotonic()
                self._keep(keeping)
            if due is not None:
                self._due(due)

    def _ready(self) -> bool:
        return bool(self._held) and self._held[0][0] <= datetime.now(UTC)

    def _keeping_due(self) -> bool:
        return bool(self._held) and time.monotonic() - self._kept_at >= KEEP_EVERY_S

    def _wait_s(self) -> float | None:
        if not self._held:
            return None
        until_due = (self._held[0][0] - datetime.now(UTC)).total_seconds()
        until_keep = KEEP_EVERY_S - (time.monotonic() - self._kept_at)
        return max(min(until_due, until_keep), 0.0)
