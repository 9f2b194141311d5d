"""Run one taken message as its Celery task, on an intake thread, and acknowledge it.

The task runs as Celery's own worker would run it: with a request made from the message
(its id, retries, headers, delivery info), so `self.request` and `self.retry` behave the
same, and Flower gets the same task events.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.events.dispatcher import EventDispatcher
from celery.exceptions import Retry
from celery.utils.saferepr import saferepr

from toolfleet.workers.intake.message import TaskMessage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MessageRunner:
    """Runs taken messages of `app`'s tasks as worker `hostname`. `ack` acknowledges one by
    its delivery tag, `requeue` puts one back on its queue; `events` (None: off) gets
    Flower's task events; `is_stopping` says the worker is shutting down."""

    app: Celery
    hostname: str
    ack: Callable[[str], None]
    events: EventDispatcher | None
    requeue: Callable[[str], None]
    is_stopping: Callable[[], bool]

    def received(self, message: TaskMessage) -> None:
        """Tell Flower the message was received (the intake does, for each one taken)."""
        eta, expires = message.eta(), message.expires()
        self._event(
            "task-received",
            message,
            name=message.task,
            args=message.headers.get("argsrepr") or saferepr(message.args),
            kwargs=message.headers.get("kwargsrepr") or saferepr(message.kwargs),
            root_id=message.headers.get("root_id"),
            parent_id=message.headers.get("parent_id"),
            retries=message.retries,
            eta=eta and eta.isoformat(),
            expires=expires and expires.isoformat(),
        )

    def run(self, message: TaskMessage) -> None:
        """Run the message's task to its end, then acknowledge the message. A task that
        raises is logged and acknowledged, as Celery does with acks_late: the tool tasks
        answer their call before they end, so nothing is owed to anyone."""
        task = self.app.tasks.get(message.task)
        if task is None:
            log.error(
                "received a message of unregistered task %r (id %s): dropped; does this "
                "worker load the module that defines it (TOOLFLEET_TOOL_MODULES)?",
                message.task,
                message.task_id,
            )
            self.ack(message.tag)
            return
        if not self._due(message):
            self.requeue(message.tag)  # the worker stops: another one runs it at its ETA
            return
        expires = message.expires()
        if expires is not None and expires < datetime.now(UTC):
            log.warning(
                "task %s[%s] expired at %s: not run", message.task, message.task_id, expires
            )
            self._event("task-revoked", message, expired=True, terminated=False, signum=None)
            self.ack(message.tag)
            return
        self._event("task-started", message)
        started = time.monotonic()
        request = {
            **message.headers,
            "id": message.task_id,
            "args": message.args,
            "kwargs": message.kwargs,
            "delivery_info": message.delivery_info,
            "reply_to": message.properties.get("reply_to"),
            "correlation_id": message.properties.get("correlation_id"),
            "hostname": self.hostname,
            "called_directly": False,
            "is_eager": False,
        }
        task.push_request(**request)
        try:
            value = task.run(*message.args, **message.kwargs)
        except Retry as retry:
            self._event(
                "task-retried",
                message,
                exception=saferepr(retry.exc),
                traceback=traceback.format_exc(),
            )
        except Exception as exc:
            log.exception("task %s[%s] raised", message.task, message.task_id)
            self._event(
                "task-failed", message, exception=saferepr(exc), traceback=traceback.format_exc()
            )
        else:
            runtime = time.monotonic() - started
            self._event("task-succeeded", message, result=saferepr(value), runtime=runtime)
        finally:
            task.pop_request()
            self.ack(message.tag)

    def _due(self, message: TaskMessage) -> bool:
        """Wait for the message's ETA (a retry's countdown), holding this thread and its
        slot, as Celery holds a reserved message; False if the worker stops first."""
        eta = message.eta()
        while eta is not None:
            left = (eta - datetime.now(UTC)).total_seconds()
            if left <= 0:
                return True
            if self.is_stopping():
                return False
            time.sleep(min(left, 0.5))  # ok: a retry's countdown, checked for stopping
        return True

    def _event(self, kind: str, message: TaskMessage, **fields: Any) -> None:
        if self.events is not None:
            self.events.send(kind, uuid=message.task_id, **fields)
