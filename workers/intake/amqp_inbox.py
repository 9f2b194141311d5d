"""Deliveries from RabbitMQ on their way from the connection's thread to the intake's
taker, which reads them into task messages in batches."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from toolfleet.shared.celery_wire.parse import MalformedMessage, decode_delivery
from toolfleet.shared.celery_wire.rabbitmq import unreadable_properties
from toolfleet.workers.intake.source import Dropped, Taken

# A delivery received: the tag the intake acknowledges it by, and py-amqp's message.
Delivery = tuple[str, Any]


class Inbox:
    """Deliveries received and not taken yet."""

    def __init__(self) -> None:
        self._deliveries: deque[Delivery] = deque()
        self._changed = threading.Condition()
        self._waits_ended = False  # the intake stops taking: no wait blocks any more

    def put(self, tag: str, message: Any) -> None:
        """Add a delivery (the connection's thread does)."""
        with self._changed:
            self._deliveries.append((tag, message))
            self._changed.notify()

    def take(self, limit: int) -> list[Delivery]:
        """Up to `limit` deliveries, oldest first."""
        with self._changed:
            count = min(limit, len(self._deliveries))
            return [self._deliveries.popleft() for _ in range(count)]

    def wait(self, timeout_s: float) -> None:
        """Block until a delivery is there, or `timeout_s` passes."""
        with self._changed:
            self._changed.wait_for(lambda: bool(self._deliveries) or self._waits_ended, timeout_s)

    def end_waits(self) -> None:
        """End the waits in progress at once, and every later one."""
        with self._changed:
            self._waits_ended = True
            self._changed.notify_all()

    def clear(self) -> list[Delivery]:
        """Take every delivery there (to give it back to the broker, or to forget it)."""
        with self._changed:
            deliveries = list(self._deliveries)
            self._deliveries.clear()
            return deliveries


class AmqpTaker:
    """Takes the deliveries of an inbox as task messages, for one intake thread."""

    def __init__(self, inbox: Inbox, name: str) -> None:
        self.name = name
        self._inbox = inbox

    def take(self, limit: int) -> Taken:
        """Up to `limit` deliveries read as task messages (or dropped)."""
        taken = Taken()
        for tag, message in self._inbox.take(limit):
            body = message.body
            unreadable = unreadable_properties(message.headers)
            if unreadable is not None:
                reason = f"a message whose properties could not be read ({unreadable})"
                taken.dropped.append(Dropped(reason, _start(body), tag))
                continue
            try:
                taken.messages.append(
                    decode_delivery(
                        tag, body, message.headers, message.properties, message.delivery_info
                    )
                )
            except MalformedMessage as exc:
                taken.dropped.append(Dropped(f"a malformed message: {exc}", _start(body), tag))
            except Exception as exc:
                reason = f"a message that could not be read: {exc!r}"
                taken.dropped.append(Dropped(reason, _start(body), tag))
        return taken

    def wait(self, timeout_s: float) -> None:
        """Block until a delivery is there, or `timeout_s` passes."""
        self._inbox.wait(timeout_s)


def _start(body: bytes | str) -> bytes:
    return (body.encode() if isinstance(body, str) else bytes(body))[:200]
