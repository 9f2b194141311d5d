"""Run taken messages as their Celery tasks, on intake threads, and acknowledge them.

A task runs as Celery's own worker would run it: with a request made from the message
(its id, retries, headers, delivery info), so `self.request` and `self.retry` behave the
same, and Flower gets the same task events. A coroutine tool's call runs in two steps,
admit and conclude, on a thread each, with the coroutine on the call loop in between:
while it awaits the network no thread waits for it. The calls of one take are admitted
together, and calls that end together are concluded together: a wide turn's thousand
calls cost a few round trips and thread hand-offs, not a thousand.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, partial
from typing import Any, NoReturn

from celery import Celery, Task
from celery.exceptions import Retry
from celery.signals import task_unknown
from celery.utils.saferepr import saferepr

from toolfleet.shared.call_signing import CALL_FIELD, SIGNATURE_FIELD
from toolfleet.shared.celery_wire.parse import TaskMessage
from toolfleet.shared.celery_wire.worker import run_as_request
from toolfleet.shared.tracing import TRACEPARENT
from toolfleet.workers.eta_guard import due_as_a_retry, would_run
from toolfleet.workers.executor import OutcomeOf
from toolfleet.workers.intake.events import TaskEvents
from toolfleet.workers.intake.gathering import Gatherer
from toolfleet.workers.tool_runs import (
    TOOL_RUNS,
    Admitted,
    Retrier,
    ToolRuns,
    celery_retry,
)

log = logging.getLogger(__name__)

# Runs a step of a message's run on an intake thread.
Submit = Callable[[Callable[[], None]], None]
# Called once a message's run has ended: its slot is free.
Done = Callable[[], None]
# Coroutine calls concluded together at most: their results go out in one round trip.
CONCLUDE_BATCH = 256


@dataclass(frozen=True)
class MessageRunner:
    """Runs taken messages of `app`'s tasks as worker `hostname`. `ack` acknowledges one by
    its delivery tag; `submit` runs a step on an intake thread; `events` (None: off) gets
    Flower's task events."""

    app: Celery
    hostname: str
    ack: Callable[[str], None]
    submit: Submit
    events: TaskEvents | None
    _ended: Gatherer[_Ended] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ended", Gatherer(self.submit, self._conclude, CONCLUDE_BATCH))

    @cached_property
    def _tasks(self) -> Mapping[str, Task[Any, Any]]:
        # The app's registry: its `tasks` property costs as much as a lookup, twice a call.
        return self.app.tasks

    def received(self, message: TaskMessage) -> None:
        """Tell Flower the message was received (the intake does, for each one taken)."""
        events = self.events
        if events is None or not events.on:
            return
        try:  # its fields are made when it is published: not at all while nobody listens
            events.send_made("task-received", lambda: _received_fields(message))
        except Exception:  # Flower's view is not worth a call
            log.warning("sending Flower's task-received event of %s failed", message.task_id)

    def may_hold(self, message: TaskMessage) -> bool:
        """Whether `message` may wait for its ETA in a slot: its task is known and would
        run it (a call signed with the fleet key, a job's checked arguments), and it is due
        as one a worker sends (a call's retry, its countdown away). Any other is run at
        once, to be refused or dropped: a client of the broker that sends messages due in
        a year (copies of a signed call among them) must not hold every slot until then."""
        task = self._tasks.get(message.task)
        return (
            task is not None
            and would_run(task, message.args, message.kwargs)
            and due_as_a_retry(task, message.retries, message.eta())
        )

    def holds_no_thread(self, message: TaskMessage) -> bool:
        """Whether the message's call runs without a thread waiting on it (a coroutine tool)."""
        runs: ToolRuns | None = getattr(self._tasks.get(message.task), TOOL_RUNS, None)
        return runs is not None and runs.holds_no_thread

    def run(self, messages: Sequence[tuple[TaskMessage, Done]]) -> None:
        """Run each message's task (due now) to its end, acknowledge it, then call its
        `done` (once, perhaps on another thread). A task that raises is logged and
        acknowledged, as Celery does with acks_late: a tool task answers its call before
        it ends. Coroutine calls are admitted together: one round trip for all their
        delivery counts, however many there are."""
        coroutines: list[_CoroutineCall] = []
        for message, done in messages:
            task = self._due_task(message, done)
            if task is None:
                continue
            self._event("task-started", message)
            started = time.monotonic()
            runs: ToolRuns | None = getattr(task, TOOL_RUNS, None)
            call = message.kwargs.get(CALL_FIELD)
            if runs is not None and runs.holds_no_thread and call is not None:
                signature = message.kwargs.get(SIGNATURE_FIELD)
                coroutines.append(
                    _CoroutineCall(task, runs, message, call, signature, done, started)
                )
                continue
            self._run_on_this_thread(task, message, done, started)
        if coroutines:
            self._admit(coroutines)

    def _run_on_this_thread(
        self, task: Task[Any, Any], message: TaskMessage, done: Done, started: float
    ) -> None:
        value, error = _attempt(
            lambda: run_as_request(
                task, message, self.hostname, lambda: task.run(*message.args, **message.kwargs)
            )
        )
        self._finish(message, done, started, value, error)

    def _due_task(self, message: TaskMessage, done: Done) -> Task[Any, Any] | None:
        """The message's task; or None, the message ended here, when this worker does not
        know the task or the message has expired."""
        task = self._tasks.get(message.task)
        if task is None:
            log.error(
                "received a message of unregistered task %r (id %s): dropped; does this "
                "worker load the module that defines it (TOOLFLEET_TOOL_MODULES)?",
                message.task,
                message.task_id,
            )
            # Answered with an error, or handed on (workers/unregistered.py), as Celery's
            # consumer does; a receiver that returns True ends the message itself, once
            # its copy is out (acknowledged before, a kill in between would lose it).
            delivery = message.delivery_info
            end = partial(self._end, message, done)
            replies = task_unknown.send(
                sender=self, message=None, exc=None, name=message.task, id=message.task_id,
                call=message.kwargs.get(CALL_FIELD), sig=message.kwargs.get(SIGNATURE_FIELD),
                queue=str(delivery.get("routing_key") or ""), task_message=message, end=end,
            )  # fmt: skip
            if not any(reply is True for _, reply in replies):
                end()
            return None
        expires = message.expires()
        if expires is not None and expires < datetime.now(UTC):
            log.warning(
                "task %s[%s] expired at %s: not run", message.task, message.task_id, expires
            )
            self._event("task-revoked", message, expired=True, terminated=False, signum=None)
            self._end(message, done)
            return None
        return task

    def _admit(self, calls: Sequence[_CoroutineCall]) -> None:
        """Step one of coroutine calls: admit them and start each on the call loop; step
        two, concluding one, goes to an intake thread when its coroutine ends."""
        # Admitting reads the request, and needs no Celery request pushed (a tenth of the
        # worker's CPU per call went to pushing and popping them).
        admissions = ToolRuns.admit_all(
            [(c.runs, MessageRequest(c.message, self.hostname), c.call, c.signature) for c in calls]
        )
        for call, (admitted, error) in zip(calls, admissions, strict=True):
            if admitted is None:  # answered, dropped or closed already; or it raised
                self._finish(call.message, call.done, call.started, None, error)
            else:
                self._start(call, admitted)

    def _start(self, call: _CoroutineCall, admitted: Admitted) -> None:
        """Start an admitted call's coroutine; it is concluded when it ends."""

        def ended(outcome: OutcomeOf) -> None:  # on the call loop's thread
            self._ended.add(_Ended(call, admitted, outcome))

        _, error = _attempt(lambda: call.runs.start(admitted, ended))
        if error is not None:  # it did not start: nothing will conclude it
            call.runs.settle(admitted)
            self._finish(call.message, call.done, call.started, None, error)

    def _conclude(self, ended: Sequence[_Ended]) -> None:
        """Step two of coroutine calls that ended together: their results posted in one
        round trip, then their messages acknowledged."""
        errors = ToolRuns.conclude_all(
            [(e.call.runs, e.admitted, e.outcome, self._retrier(e.call)) for e in ended]
        )
        for e, error in zip(ended, errors, strict=True):
            self._finish(e.call.message, e.call.done, e.call.started, None, error)

    def _retrier(self, call: _CoroutineCall) -> Retrier:
        """Retrying a call runs Celery's `retry` with the task's request made from the
        message (only then: concluding needs no request otherwise)."""
        retry = celery_retry(call.task)

        def with_request(countdown: float, exc: Exception) -> NoReturn:
            run_as_request(call.task, call.message, self.hostname, lambda: retry(countdown, exc))
            raise AssertionError("Celery's retry returned")  # it raises Retry

        return with_request

    def _finish(
        self,
        message: TaskMessage,
        done: Done,
        started: float,
        value: Any,
        error: Exception | None,
    ) -> None:
        """Tell Flower how the task ended, acknowledge its message, call `done`."""
        if isinstance(error, Retry):
            self._event("task-retried", message, exception=saferepr(error.exc), traceback="")
        elif error is not None:
            log.error("task %s[%s] raised", message.task, message.task_id, exc_info=error)
            trace = "".join(traceback.format_exception(error))
            self._event("task-failed", message, exception=saferepr(error), traceback=trace)
        else:
            runtime = time.monotonic() - started
            # A tool task returns nothing: Celery's saferepr of None costs ~2 us a call.
            result = "None" if value is None else saferepr(value)
            self._event("task-succeeded", message, result=result, runtime=runtime)
        self._end(message, done)

    def _end(self, message: TaskMessage, done: Done) -> None:
        self.ack(message.tag)
        done()

    def _event(self, kind: str, message: TaskMessage, **fields: Any) -> None:
        if self.events is not None and self.events.on:
            _send(self.events, kind, message, **fields)


def _received_fields(message: TaskMessage) -> dict[str, Any]:
    """The fields of `message`'s task-received event, as Celery's consumer sends them."""
    eta, expires = message.eta(), message.expires()
    return {
        "uuid": message.task_id,
        "name": message.task,
        "args": message.argsrepr or saferepr(message.args),
        "kwargs": message.kwargsrepr or saferepr(message.kwargs),
        "root_id": message.root_id,
        "parent_id": message.parent_id,
        "retries": message.retries,
        "eta": eta and eta.isoformat(),
        "expires": expires and expires.isoformat(),
    }


def _send(events: TaskEvents, kind: str, message: TaskMessage, **fields: Any) -> None:
    """Keep `message`'s event `kind` for Flower; a failure is logged, never raised."""
    try:
        events.send(kind, uuid=message.task_id, **fields)
    except Exception:  # Flower's view is not worth a call: its ack comes next
        log.warning("sending Flower's %s event of task %s failed", kind, message.task_id)


@dataclass(frozen=True)
class _CoroutineCall:
    """A coroutine tool's call, started (as Flower was told) and waiting to be admitted."""

    task: Task[Any, Any]
    runs: ToolRuns
    message: TaskMessage
    call: Any  # the kwargs `call` and `sig`, checked when it is admitted
    signature: Any
    done: Done
    started: float


@dataclass(frozen=True)
class _Ended:
    """A coroutine call that ended: what concluding it needs."""

    call: _CoroutineCall
    admitted: Admitted
    outcome: OutcomeOf  # made by the step that concludes it


class MessageRequest:
    """What admitting a call reads of its task's request, read from its message (its
    delivery info carries RabbitMQ's redelivered flag)."""

    def __init__(self, message: TaskMessage, hostname: str) -> None:
        self.id = message.task_id
        self.retries = message.retries
        self.hostname = hostname
        self.delivery_info = message.delivery_info
        setattr(self, TRACEPARENT, message.headers.get(TRACEPARENT))


def _attempt(step: Callable[[], Any]) -> tuple[Any, Exception | None]:
    """`step()`'s value, or the exception it raised (Celery's Retry is one)."""
    try:
        return step(), None
    except Exception as exc:
        return None, exc
