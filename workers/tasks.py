"""Celery tasks: `tool.<name>` per tool (decode, execute, report) and `job.<name>` per job."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from celery import Celery, Task
from pydantic import ValidationError

from toolfleet.shared import tracing
from toolfleet.shared.celery_config import tool_pool, tool_time_limit
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.jobs import Job, JobContext, JobScheduler, PostResult
from toolfleet.shared.keys import Keys, queue_name, task_name
from toolfleet.shared.messages import (
    CallStatus,
    PendingCall,
    RunningCall,
    ToolCall,
    ToolResult,
    error_result,
)
from toolfleet.shared.metrics import guarded, metrics
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.sealing import Sealer, SealError, unseal
from toolfleet.shared.tools import FunctionTool, ToolRegistry
from toolfleet.workers.call_loop import CallStopped
from toolfleet.workers.executor import execute
from toolfleet.workers.spans import end_run_span, run_span

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

# A delivery counter outlives any redelivery of its call, then goes.
DELIVERIES_TTL_S = 24 * 3600
# A session's record of started calls goes this long after its last call started.
RUNNING_TTL_S = 3600


@dataclass(frozen=True)
class DeliveryGuard:
    """Counts the broker's deliveries of a call, so a tool that kills its worker stops.

    With acks_late and task_reject_on_worker_lost, Celery requeues a call whose worker
    process died - forever, if the tool itself kills it. Each attempt (`retries`: a
    retry via `self.retry` is a new message, not a crash) is allowed `max_deliveries`.
    """

    client: redis.Redis
    keys: Keys
    max_deliveries: int

    def count(self, call: ToolCall, retries: int, worker: str = "") -> tuple[int, bool]:
        """Count one delivery: how many this attempt of the call has had, and whether the
        orchestrator closed the call already (one round trip for both). The same round trip
        records who runs the call since when (`Keys.running`), for live progress."""
        key = self.keys.deliveries(call.call_id, retries)
        running = self.keys.running(call.session_id)
        started = RunningCall(worker=worker, pid=os.getpid(), started_at=time.time())
        pipe = self.client.pipeline()
        pipe.incr(key)
        pipe.expire(key, DELIVERIES_TTL_S)
        pipe.exists(self.keys.closed(call.session_id, call.call_id))
        pipe.hset(running, call.call_id, started.model_dump_json())
        pipe.expire(running, RUNNING_TTL_S)
        count, _, closed, _, _ = pipe.execute()
        return int(count), bool(closed)

    def exhausted(self, count: int) -> bool:
        """True once `count` deliveries exceed `max_deliveries`: answer WorkerLost, do not run."""
        return count > self.max_deliveries


def worker_lost(call: ToolCall, deliveries: int, *, worker: str, attempt: int) -> ToolResult:
    """The answer to a call not run again: every earlier delivery lost its worker."""
    message = (
        f"tool {call.tool!r} was delivered {deliveries} times and its worker died each "
        "time, so it was not run again"
    )
    return error_result(
        call, "WorkerLost", message, worker=worker, pid=os.getpid(), attempt=attempt
    )


SEAL_REFUSAL = (
    "the call's secret arguments could not be decrypted on the worker (the fleet is "
    "misconfigured), so the tool did not run"
)


def unsealed(call: ToolCall, sealer: Sealer | None, secret_names: Sequence[str]) -> ToolCall:
    """The call with the secrets the orchestrator sealed opened: the tool gets the real
    values. SealError when one does not open."""
    args = unseal(call.args, sealer, secret_names)
    state = unseal(call.state, sealer, secret_names)
    return call.model_copy(update={"args": args, "state": state})


@dataclass(frozen=True)
class ToolTaskDeps:
    """What every tool task needs besides its tool."""

    settings: Settings
    reporter: ResultReporter
    completions: Completions
    services: ToolServices
    deliveries: DeliveryGuard | None = None  # None: no crash guard (in-process tests)
    sealer: Sealer | None = None  # opens the secrets the orchestrator sealed (fleet key)


def register_tool_tasks(app: Celery, registry: ToolRegistry, deps: ToolTaskDeps) -> None:
    """Register a `tool.<name>` task per tool, on its pool's queue with its time limits.

    Each task checks the envelope and the delivery count, registers a long-running call's
    ticket, runs the tool, retries on the tool's `retry_on`, and posts the result to
    `reply_to`."""
    for tool in registry.values():
        _register_tool(app, tool, deps)


def result_poster(completions: Completions, source: str) -> PostResult:
    """Posts results of pending calls as `source` (jobs; tools whose work goes on)."""

    def post_result(call_id: str, response: dict[str, Any], *, final: bool = True) -> None:
        completions.post_result(call_id, response, final=final, source=source)

    return post_result


def register_job_tasks(app: Celery, jobs: dict[str, Job], completions: Completions) -> None:
    """`job.<name>` tasks: background work started by long-running tools."""
    context = JobContext(post_result=result_poster(completions, "job"))
    for found in jobs.values():

        def run_job(job: Job = found, **kwargs: Any) -> None:
            if job.wants_context:
                kwargs["job_context"] = context
            job.func(**kwargs)

        app.task(name=found.task_name, queue=queue_name(found.pool), acks_late=True)(run_job)


def make_scheduler(app: Celery) -> JobScheduler:
    """The job scheduler of tool services: sends `job.<name>` to the job's pool queue, to run
    `delay_s` seconds later (a Celery countdown)."""

    def schedule(job: Job, delay_s: float, kwargs: dict[str, Any]) -> None:
        app.send_task(job.task_name, kwargs=kwargs, queue=queue_name(job.pool), countdown=delay_s)

    return schedule


def _register_tool(app: Celery, tool: FunctionTool, deps: ToolTaskDeps) -> None:
    settings = deps.settings
    limit = tool_time_limit(tool, settings)
    options = tool.options
    pool = tool_pool(tool, settings)

    def run_tool(self: Task[Any, Any], call: dict[str, Any]) -> None:
        try:
            envelope = ToolCall.model_validate(call)
        except ValidationError as exc:
            # Nothing to answer: without a valid envelope we do not know where to reply.
            log.error("rejected a malformed call envelope for %s: %s", tool.name, exc)
            return
        span = run_span(tool.name, envelope, self.request, pool, settings.secret_arg_names)
        if span is None:  # tracing off
            run_call(self, envelope, None)
            return
        try:
            with tracing.current(span):  # an agent tool's invocation is a child of it
                result = run_call(self, envelope, span)
        except BaseException as exc:  # Celery's Retry too: this attempt ends here
            tracing.finish(span, error=type(exc).__name__)
            raise
        end_run_span(span, result)

    def run_call(self: Task[Any, Any], envelope: ToolCall, span: Span | None) -> ToolResult | None:
        """Run one valid call; the result posted (None: none, the call was closed)."""
        attempt = self.request.retries + 1
        worker = self.request.hostname or "unknown"
        try:
            envelope = unsealed(envelope, deps.sealer, settings.secret_arg_names)
        except SealError as exc:
            log.error("call %s (%s) not run: %s", envelope.call_id, tool.name, exc)
            refused = error_result(envelope, "SealedArgumentError", SEAL_REFUSAL, worker=worker)
            deps.reporter.post(envelope.reply_to, refused)
            return refused
        closed: bool | None = None  # None: not checked yet
        if deps.deliveries is not None:
            count, closed = deps.deliveries.count(envelope, self.request.retries, worker)
            if deps.deliveries.exhausted(count) and not closed:
                log.error(
                    "call %s (%s) delivered %d times, its worker lost each time: not run again",
                    envelope.call_id,
                    tool.name,
                    count - 1,
                )
                if tool.is_long_running:
                    deps.completions.withdraw(envelope.call_id)
                lost = worker_lost(envelope, count - 1, worker=worker, attempt=attempt)
                deps.reporter.post(envelope.reply_to, lost)
                return lost
        starting = PendingCall.starting(envelope)
        # A closed call was answered already (it timed out waiting in the queue, say):
        # running it now would act on a call the model was told did not happen. A
        # long-running call opens its ticket in the same step as that check, before it
        # runs: a job the tool starts may post its result at once.
        if tool.is_long_running and not closed:
            closed = not deps.completions.register(starting)
        elif closed is None:
            closed = deps.completions.is_closed(starting)
        if closed:
            log.warning(
                "call %s (%s) was answered before it started (timed out?): not run",
                envelope.call_id,
                tool.name,
            )
            return None
        outcome = execute(
            tool,
            envelope,
            worker=worker,
            attempt=attempt,
            max_result_bytes=settings.max_payload_bytes,
            time_limit_s=limit,
            services=deps.services,
        )
        error = outcome.exception
        if isinstance(error, CallStopped):
            log.info("call %s (%s) stopped: its session was cancelled", envelope.call_id, tool.name)
            return None  # the orchestrator answered it (Cancelled) and closed it
        retries_left = self.request.retries < options.max_retries
        if isinstance(error, Exception) and isinstance(error, options.retry_on) and retries_left:
            countdown = options.retry_backoff_s * (2**self.request.retries)
            log.warning(
                "tool %s raised %s; retry %d of %d in %.1fs",
                tool.name,
                type(error).__name__,
                attempt,
                options.max_retries,
                countdown,
            )
            raise self.retry(countdown=countdown, exc=error)
        result = outcome.result
        result.traceparent = tracing.traceparent(span)
        with guarded():
            ran = metrics().tool_run_seconds.labels(tool.name, pool, result.status.value)
            ran.observe(result.duration_s)
        if tool.is_long_running:
            if result.status is CallStatus.PENDING:
                ticket = PendingCall.starting(envelope, result.response, result.traceparent)
                deps.completions.register(ticket)
            else:
                deps.completions.withdraw(envelope.call_id)
        deps.reporter.post(envelope.reply_to, result)
        return result

    task_options: dict[str, Any] = dict(
        name=task_name(tool.name),
        bind=True,
        queue=queue_name(pool),
        soft_time_limit=limit,
        time_limit=limit + 1,
        acks_late=True,
        ignore_result=True,
        max_retries=options.max_retries,
    )
    app.task(**task_options)(run_tool)
