"""What toolfleet reads and does inside a running Celery worker beyond its public API:
the requests it runs, its pool implementation, and a task's request made from a
message that Celery's consumer did not take."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from celery import Task
from celery.app.task import Context
from celery.worker import state as worker_state

from toolfleet.shared.call_signing import CALL_FIELD, call_fields
from toolfleet.shared.celery_wire.parse import TaskMessage

T = TypeVar("T")

# The pool implementations by module, under the names `celery worker -P` takes.
_POOL_NAMES = {"celery.concurrency.thread": "threads", "celery.concurrency.prefork": "prefork"}


@dataclass(frozen=True)
class ActiveCall:
    """A task request Celery's consumer handed to the worker's pool and that has not
    ended: its task's name and the fields of its call envelope, as read without checks
    ({} for none)."""

    task: str
    call: dict[str, Any]
    _request: Any

    def terminate(self, pool: Any) -> None:
        """Kill the prefork child that runs it (SIGKILL: the pool starts another)."""
        self._request.terminate(pool, signal=signal.SIGKILL)


def active_calls() -> list[ActiveCall]:
    """The requests this worker process's consumer runs now (an io worker's intake runs
    its own calls apart: they are not among them)."""
    return [
        ActiveCall(str(request.name), call_fields((request.kwargs or {}).get(CALL_FIELD)), request)
        for request in list(worker_state.active_requests)
    ]


def pool_name(pool: Any) -> str:
    """The name of a worker's pool implementation (its consumer's `pool`), as
    `celery worker -P` takes it: threads, prefork, solo..."""
    module = type(pool).__module__
    return _POOL_NAMES.get(module, module.rpartition(".")[2])


def run_as_request(
    task: Task[Any, Any], message: TaskMessage, hostname: str, step: Callable[[], T]
) -> T:
    """`step()` with `task`'s request made from `message`, as Celery's worker makes it for
    the task it runs (so `self.request` and `self.retry` behave the same) on `hostname`."""
    # Celery's push_request first copies the thread's current request: a fifth of this
    # step's time with no gain, as the message's request is complete.
    task.request_stack.push(
        Context(
            {
                **message.headers,
                "id": message.task_id,
                "args": message.args,
                "kwargs": message.kwargs,
                "delivery_info": message.delivery_info,
                "reply_to": message.properties.get("reply_to"),
                "correlation_id": message.properties.get("correlation_id"),
                "hostname": hostname,
                "called_directly": False,
                "is_eager": False,
            }
        )
    )
    try:
        return step()
    finally:
        task.pop_request()
