"""Flower's task events of an intake: buffered, and published from one thread every
TASK_EVENTS_PERIOD_S on a connection of their own, made anew after it fails.

Celery's dispatcher never reconnects: once its connection dropped (RabbitMQ restarted,
or closed it) every publish fails, and it keeps what failed to publish again, without
bound. Celery's consumer makes a new dispatcher when it reconnects; the intake makes one
at the next flush after a failure (the events of that flush are lost: Flower's view is
not worth holding memory for).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from celery import Celery
from celery.events.dispatcher import EventDispatcher

log = logging.getLogger(__name__)

# Events buffered at most before a send publishes them itself: the timed flush comes
# first under any load an io worker takes.
BUFFER_LIMIT = 10_000


class TaskEvents:
    """The task events of worker `hostname` of `app`."""

    def __init__(self, app: Celery, hostname: str) -> None:
        self._app = app
        self._hostname = hostname
        self._dispatcher: EventDispatcher | None = self._open()

    def send(self, kind: str, **fields: Any) -> None:
        """Buffer an event (dropped while there is no connection)."""
        dispatcher = self._dispatcher
        if dispatcher is not None:
            dispatcher.send(kind, **fields)

    def flush(self) -> None:
        """Publish the events buffered (one thread's job); after a failure, on a new
        connection the next time."""
        dispatcher = self._dispatcher
        if dispatcher is None:
            dispatcher = self._dispatcher = self._open()
        try:
            dispatcher.flush()
        except Exception:
            self._dispatcher = None
            log.warning(
                "publishing task events failed: they are lost, and the next ones go on a "
                "new connection",
                exc_info=True,
            )
            _discard(dispatcher, lost=True)

    def close(self) -> None:
        """Publish what is buffered and close."""
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is None:
            return
        try:
            dispatcher.flush()
        except Exception:
            log.warning("publishing the last task events failed", exc_info=True)
        finally:
            _discard(dispatcher, lost=False)

    def _open(self) -> EventDispatcher:
        # Connecting is lazy: a broker that is down fails the first flush, not this.
        dispatcher: EventDispatcher = self._app.events.Dispatcher(
            self._app.connection_for_write(),
            hostname=self._hostname,
            groups=["task"],
            buffer_group=["task"],
            buffer_limit=BUFFER_LIMIT,
            buffer_while_offline=False,  # a failed publish raises: see above
        )
        return dispatcher


def _discard(dispatcher: EventDispatcher, *, lost: bool) -> None:
    """Close `dispatcher` and its connection (one that was `lost` without a word to the
    broker, which may not answer)."""
    with contextlib.suppress(Exception):
        dispatcher.close()
    connection = dispatcher.connection
    if connection is not None:
        with contextlib.suppress(Exception):
            connection.collect() if lost else connection.release()
