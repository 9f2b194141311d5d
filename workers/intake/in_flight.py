"""The messages an intake runs, by task id and retry: a copy of one that arrives while it
runs waits for it to end.

RabbitMQ delivers a message again when the connection that took it drops, though its
call may still run in this process (the intake connects again and may get the copy
back). Run at once, the copy would run the call a second time; after the first run
ended, it finds the call answered and is acknowledged without running, as a late copy
is on Redis.
"""

from __future__ import annotations

import threading

from toolfleet.shared.celery_wire.parse import TaskMessage

# A task id and its retries: one attempt of a call (a retry is a new message, same id).
Attempt = tuple[str, int]


class InFlight:
    """The attempts running here, each with the copies that wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[Attempt, list[TaskMessage]] = {}

    def enter(self, message: TaskMessage) -> bool:
        """Whether `message` may run now; False: a copy of it runs, and it waits."""
        attempt = (message.task_id, message.retries)
        with self._lock:
            copies = self._waiting.get(attempt)
            if copies is None:
                self._waiting[attempt] = []
                return True
            copies.append(message)
            return False

    def leave(self, message: TaskMessage) -> list[TaskMessage]:
        """`message` (entered) ended; the copies that waited for it, to run now."""
        with self._lock:
            return self._waiting.pop((message.task_id, message.retries), [])
