"""One tool's calls on a worker: admitted (checked, counted, not closed), executed, concluded
(retried or reported).

A Celery task runs the three steps on its thread. An io worker's intake runs a coroutine
tool's call in two steps on its threads, admit then conclude, with the coroutine on the
process's call loop between them: a call awaiting the network holds no thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celery import Task
from pydantic import ValidationError

from toolfleet.shared import tracing
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, PendingCall, ToolCall, ToolResult, error_result
from toolfleet.shared.metrics import guarded, metrics
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.sealing import Sealer, SealError, unseal
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.call_loop import CallStopped
from toolfleet.workers.deliveries import DeliveryGuard, worker_lost
from toolfleet.workers.executor import Execution, Outcome, run_execution, start_coroutine
from toolfleet.workers.spans import end_run_span, run_span

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

# The attribute of a `tool.<name>` Celery task that holds its ToolRuns.
TOOL_RUNS = "toolfleet_runs"


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


@dataclass(frozen=True)
class Admitted:
    """A call cleared to run: its envelope (secrets opened) and this attempt's details."""

    envelope: ToolCall
    span: Span | None
    attempt: int
    worker: str


class ToolRuns:
    """Runs the calls of `tool` (on pool `pool`, within `limit_s` seconds each)."""

    def __init__(self, tool: FunctionTool, deps: ToolTaskDeps, limit_s: float, pool: str) -> None:
        self.tool = tool
        self._deps = deps
        self._limit_s = limit_s
        self._pool = pool

    @property
    def holds_no_thread(self) -> bool:
        """Whether its calls can run without a thread waiting on them: coroutine tools."""
        return self.tool.is_async

    def run(self, task: Task[Any, Any], call: dict[str, Any]) -> None:
        """The whole call, on this thread: admit, execute, conclude."""
        admitted = self.admit(task.request, call)
        if admitted is None:
            return
        with _in_span(admitted.span):
            outcome = run_execution(self._execution(admitted), self._limit_s)
        self.conclude(task, admitted, outcome)

    def start(self, admitted: Admitted, on_outcome: Callable[[Outcome], None]) -> None:
        """Start an admitted coroutine call on the call loop; `on_outcome` gets its Outcome
        (on the loop's thread) when it ends."""
        with _in_span(admitted.span):  # the coroutine's context has the run's span
            start_coroutine(self._execution(admitted), self._limit_s, on_outcome)

    def _execution(self, admitted: Admitted) -> Execution:
        return Execution(
            self.tool,
            admitted.envelope,
            worker=admitted.worker,
            attempt=admitted.attempt,
            max_result_bytes=self._deps.settings.max_payload_bytes,
            services=self._deps.services,
        )

    def admit(self, request: Any, call: dict[str, Any]) -> Admitted | None:
        """The call cleared to run, or None: it was malformed, refused, lost too often or
        closed already (each answered or logged here). `request`: the task's request
        (Celery's, or what the intake read of the message: id, retries, hostname and
        the traceparent header)."""
        settings = self._deps.settings
        try:
            envelope = ToolCall.model_validate(call)
        except ValidationError as exc:
            # Nothing to answer: without a valid envelope we do not know where to reply.
            log.error("rejected a malformed call envelope for %s: %s", self.tool.name, exc)
            return None
        span = run_span(self.tool.name, envelope, request, self._pool, settings.secret_arg_names)
        admitted = Admitted(envelope, span, request.retries + 1, request.hostname or "unknown")
        with _in_span(admitted.span):
            cleared = self._clear(admitted)
        if cleared is None or isinstance(cleared, ToolResult):
            end_run_span(span, cleared)
            return None
        return cleared

    def conclude(self, task: Task[Any, Any], admitted: Admitted, outcome: Outcome) -> None:
        """Retry the call (Celery's Retry is raised) or report its result."""
        with _in_span(admitted.span):
            result = self._conclude(task, admitted, outcome)
        end_run_span(admitted.span, result)

    def _clear(self, admitted: Admitted) -> Admitted | ToolResult | None:
        """The admitted call with its secrets opened; or the answer already posted (refused,
        lost), or None when it was closed."""
        deps, tool = self._deps, self.tool
        envelope, worker, attempt = admitted.envelope, admitted.worker, admitted.attempt
        try:
            envelope = unsealed(envelope, deps.sealer, deps.settings.secret_arg_names)
        except SealError as exc:
            log.error("call %s (%s) not run: %s", envelope.call_id, tool.name, exc)
            refused = error_result(envelope, "SealedArgumentError", SEAL_REFUSAL, worker=worker)
            deps.reporter.post(envelope.reply_to, refused)
            return refused
        closed: bool | None = None  # None: not checked yet
        if deps.deliveries is not None:
            count, closed = deps.deliveries.count(envelope, attempt - 1, worker)
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
        # A closed call was answered already (it timed out waiting in the queue, say):
        # running it now would act on a call the model was told did not happen. A
        # long-running call opens its ticket in the same step as that check, before it
        # runs: a job the tool starts may post its result at once.
        if tool.is_long_running and not closed:
            closed = not deps.completions.register(PendingCall.starting(envelope))
        elif closed is None:
            closed = deps.completions.is_closed(PendingCall.starting(envelope))
        if closed:
            log.warning(
                "call %s (%s) was answered before it started (timed out?): not run",
                envelope.call_id,
                tool.name,
            )
            return None
        return Admitted(envelope, admitted.span, attempt, worker)

    def _conclude(
        self, task: Task[Any, Any], admitted: Admitted, outcome: Outcome
    ) -> ToolResult | None:
        """The result posted (None: none, the call was stopped); Retry raised to retry."""
        deps, tool, options = self._deps, self.tool, self.tool.options
        envelope = admitted.envelope
        error = outcome.exception
        if isinstance(error, CallStopped):
            log.info("call %s (%s) stopped: its session was cancelled", envelope.call_id, tool.name)
            return None  # the orchestrator answered it (Cancelled) and closed it
        retries_left = task.request.retries < options.max_retries
        if isinstance(error, Exception) and isinstance(error, options.retry_on) and retries_left:
            countdown = options.retry_backoff_s * (2**task.request.retries)
            log.warning(
                "tool %s raised %s; retry %d of %d in %.1fs",
                tool.name,
                type(error).__name__,
                admitted.attempt,
                options.max_retries,
                countdown,
            )
            raise task.retry(countdown=countdown, exc=error)
        result = outcome.result
        result.traceparent = tracing.traceparent(admitted.span)
        with guarded():
            recorded = metrics()
            ran = recorded.labelled(
                recorded.tool_run_seconds, tool.name, self._pool, result.status.value
            )
            ran.observe(result.duration_s)
        closes = None
        if tool.is_long_running:
            if result.status is CallStatus.PENDING:
                ticket = PendingCall.starting(envelope, result.response, result.traceparent)
                deps.completions.register(ticket)
            else:
                deps.completions.withdraw(envelope.call_id)
        elif not result.actions.waits():
            # The call's final answer closes it, in the step that posts it: if this
            # process dies before the broker's ack, the redelivered message does not run
            # the tool again - whether or not the orchestrator stored the answer by then.
            # (A call that asked for a credential or a confirmation runs again once they
            # are given: it stays open.)
            closes = Keys(deps.settings.key_prefix).closed(envelope.session_id, envelope.call_id)
        deps.reporter.post(envelope.reply_to, result, closes=closes)
        return result


@contextmanager
def _in_span(span: Span | None) -> Iterator[None]:
    """`span` as the current one in the block; an exception leaving the block (Celery's
    Retry too: this attempt ends) ends the span with its type."""
    try:
        with tracing.current(span):
            yield
    except BaseException as exc:
        tracing.finish(span, error=type(exc).__name__)
        raise
