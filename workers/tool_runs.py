"""One tool's calls on a worker: admitted (checked, counted, not closed), executed, concluded
(retried or reported).

A Celery task runs the three steps on its thread. An io worker's intake runs a coroutine
tool's call in two steps on its threads, admit then conclude, with the coroutine on the
process's call loop between them: a call awaiting the network holds no thread. It admits
the calls of a batch together (`ToolRuns.admit_all`: one round trip for their delivery
counts) and concludes together those that end together (`ToolRuns.conclude_all`: one for
their results). A single call is a batch of one: both ways run the same steps.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from celery import Task
from pydantic import ValidationError

from toolfleet.shared import tracing
from toolfleet.shared.call_signing import CallSigner, RefusedCall, read_call
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys, task_name
from toolfleet.shared.messages import CallStatus, PendingCall, ToolCall, ToolResult, error_result
from toolfleet.shared.metrics import guarded, metrics
from toolfleet.shared.reporting import Post, ResultReporter, TicketWrite
from toolfleet.shared.sealing import Sealer, SealError, may_hold_sealed, unseal
from toolfleet.shared.state_snapshots import SnapshotLoader
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.call_loop import CallStopped
from toolfleet.workers.deliveries import DeliveryGuard, worker_lost
from toolfleet.workers.executor import (
    Execution,
    Outcome,
    OutcomeOf,
    abandoned_run,
    masked_secrets,
    run_execution,
    start_coroutine,
)
from toolfleet.workers.limits import Gate, Turn
from toolfleet.workers.spans import end_run_span, run_span

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

# The attribute of a `tool.<name>` Celery task that holds its ToolRuns.
TOOL_RUNS = "toolfleet_runs"

# A delivery's count and whether its call was closed already; None: not counted.
Delivery = tuple[int, bool] | None


SEAL_REFUSAL = (
    "the call's secret arguments could not be decrypted on the worker (the fleet is "
    "misconfigured), so the tool did not run"
)


STATE_REFUSAL = (
    "the session state this call was sent with is no longer stored (the call waited past "
    "its deadline, or Redis lost it), so the tool did not run; call it again"
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
    gate: Gate | None = None  # fleet-wide limits (max_concurrency, rate_limit); None: off
    signer: CallSigner | None = None  # checks the orchestrator's signature (fleet key)
    snapshots: SnapshotLoader | None = None  # loads states stored apart; None: inline only


@dataclass(frozen=True)
class Admitted:
    """A call cleared to run: its envelope (secrets opened) and this attempt's details."""

    envelope: ToolCall
    span: Span | None
    attempt: int
    worker: str
    redelivered: bool = False  # the broker's flag: this message was delivered before
    # Whether the envelope's JSON may hold sealed values (`may_hold_sealed`): only then is
    # it walked to open them.
    sealed: bool = True
    # Whether this delivery claimed its attempt (`DeliveryGuard.claims`): it settles the
    # claim when it ends.
    claimed: bool = False


# Raises Celery's Retry for a call: its countdown in seconds and the tool's exception.
Retrier = Callable[[float, Exception], NoReturn]

# A call's admission: cleared to run (or None: answered, dropped or closed already), or
# the exception that stopped it.
Admission = tuple[Admitted | None, Exception | None]


class ToolRuns:
    """Runs the calls of `tool` (on pool `pool`, within `limit_s` seconds each)."""

    def __init__(self, tool: FunctionTool, deps: ToolTaskDeps, limit_s: float, pool: str) -> None:
        self.tool = tool
        self._task = task_name(tool.name)  # what its messages come as
        self._deps = deps
        self._limit_s = limit_s
        self._pool = pool

    @property
    def holds_no_thread(self) -> bool:
        """Whether its calls can run without a thread waiting on them: coroutine tools."""
        return self.tool.is_async

    def readable(self, call: Any, signature: Any) -> bool:
        """Whether a message of this tool's task with kwargs `call` and `sig` carries a
        call it would run: signed (with a fleet key), of this tool, recent. What an io
        worker asks before it holds a message for its ETA: one it would refuse is refused
        at once, not held in a slot."""
        try:
            read_call(self._task, call, signature, self._deps.signer)
        except (RefusedCall, ValidationError):
            return False
        return True

    def run(self, task: Task[Any, Any], call: Any, signature: Any = None) -> None:
        """The whole call, on this thread: admit, execute, conclude."""
        admitted = self.admit(task.request, call, signature)
        if admitted is None:
            return
        try:
            self._run(task, admitted)
        finally:
            self.settle(admitted)

    def _run(self, task: Task[Any, Any], admitted: Admitted) -> None:
        gate = self._gate()
        with _in_span(admitted.span):
            turn: Turn | None = None
            began = time.monotonic()
            try:
                if gate is not None:  # on prefork the wait holds this pool process
                    envelope, worker = admitted.envelope, admitted.worker
                    # Made before the wait: a soft time limit raised as the wait returns
                    # still finds the slot to give back below.
                    turn = gate.turn_for(self.tool, envelope)
                    if gate.wait(self.tool, envelope, worker, self._limit_s, turn) is None:
                        # Answered while it waited: not run.
                        end_run_span(admitted.span, None)
                        return
            except BaseException as exc:  # interrupted while waiting: its time limit
                outcome = self._execution(admitted).raised(exc, self._limit_s)
            else:
                # The wait counts toward the call's limit, as Celery's counts it on prefork.
                waited_s = time.monotonic() - began
                outcome = run_execution(self._execution(admitted), self._limit_s, waited_s)
            finally:
                still_running = abandoned_run()
                if gate is not None and turn is not None:
                    _end_when_done(gate, turn, still_running)
        self.conclude(task, admitted, outcome)

    def settle(self, admitted: Admitted) -> None:
        """The admitted call's delivery ended (concluded, or never started): settle the
        claim it holds, if any."""
        ToolRuns.settle_all([(self, admitted)])

    @staticmethod
    def settle_all(calls: Sequence[tuple[ToolRuns, Admitted]]) -> None:
        """`settle` for many calls, in a round trip per guard. A failure to is logged:
        the claims' leases lapse then."""
        by_guard: dict[int, tuple[DeliveryGuard, list[tuple[ToolCall, int]]]] = {}
        for runs, admitted in calls:
            guard = runs._deps.deliveries
            if admitted.claimed and guard is not None:
                attempt = (admitted.envelope, admitted.attempt - 1)
                by_guard.setdefault(id(guard), (guard, []))[1].append(attempt)
        for guard, attempts in by_guard.values():
            try:
                guard.settle(attempts)
            except Exception:
                log.exception("could not settle the claims of %d calls", len(attempts))

    def start(self, admitted: Admitted, on_end: Callable[[OutcomeOf], None]) -> None:
        """Start an admitted coroutine call on the call loop; `on_end` gets what makes its
        Outcome (on the loop's thread) when it ends, for `conclude_all`. A limited tool's
        call waits its turn there first, holding no thread."""
        gate = self._gate()
        limited = None if gate is None else gate.wrap(self.tool, admitted.envelope, admitted.worker)
        with _in_span(admitted.span):  # the coroutine's context has the run's span
            start_coroutine(self._execution(admitted), self._limit_s, on_end, limited)

    def _gate(self) -> Gate | None:
        """The gate when the tool has a fleet-wide limit: no round trip for the others."""
        return self._deps.gate if self.tool.options.limited else None

    def _execution(self, admitted: Admitted) -> Execution:
        return Execution(
            self.tool,
            admitted.envelope,
            worker=admitted.worker,
            attempt=admitted.attempt,
            max_result_bytes=self._deps.settings.max_payload_bytes,
            services=self._deps.services,
            max_json_depth=self._deps.settings.max_json_depth,
            secret_names=self._deps.settings.secret_arg_names,
        )

    def admit(self, request: Any, call: Any, signature: Any = None) -> Admitted | None:
        """The call cleared to run, or None: it was malformed, refused, lost too often or
        closed already (each answered or logged here). `request`: the task's request
        (Celery's, or what the intake read of the message: id, retries, hostname and
        the traceparent header); `call` and `signature`: the task's kwargs `call` and
        `sig`. What stopped it is raised."""
        ((admitted, error),) = ToolRuns.admit_all([(self, request, call, signature)])
        if error is not None:
            raise error
        return admitted

    def conclude(self, task: Task[Any, Any], admitted: Admitted, outcome: Outcome) -> None:
        """Retry the call (Celery's Retry is raised) or report its result (an error posting
        it is raised)."""
        (error,) = ToolRuns.conclude_all([(self, admitted, outcome, celery_retry(task))])
        if error is not None:
            raise error

    @classmethod
    def admit_all(cls, calls: Sequence[tuple[ToolRuns, Any, Any, Any]]) -> list[Admission]:
        """`admit` for many calls (runs, request, call, signature) at once: an io worker's
        taken batch. The same steps for each call, with their delivery counts in one round
        trip. Each call's admission: Admitted or None, or the exception that stopped it."""
        admissions: list[Admission] = [(None, None)] * len(calls)
        opened: list[_Opened] = []
        for at, (runs, request, call, signature) in enumerate(calls):
            try:
                admitted = runs._opened(request, call, signature)
            except Exception as exc:
                admissions[at] = (None, exc)
                continue
            if admitted is not None:
                opened.append((at, runs, admitted))
        with _in_spans([admitted.span for *_, admitted in opened]):
            counted = _round_trips(opened, lambda entry: entry[1]._deps.deliveries, _count_all)
        for (at, runs, admitted), delivery in zip(opened, counted, strict=True):
            try:
                admissions[at] = (runs._settled(admitted, delivery), None)
            except Exception as exc:
                admissions[at] = (None, exc)
        return admissions

    @classmethod
    def conclude_all(
        cls, calls: Sequence[tuple[ToolRuns, Admitted, Outcome | OutcomeOf, Retrier]]
    ) -> list[Exception | None]:
        """`conclude` for many calls (runs, admission, outcome or what makes it, how to retry
        it) at once: an io worker's coroutine calls that ended together, their results
        posted in one round trip. Each call's error (Celery's Retry is one), or None."""
        try:
            return cls._conclude_all(calls)
        finally:
            cls.settle_all([(runs, admitted) for runs, admitted, *_ in calls])

    @classmethod
    def _conclude_all(
        cls, calls: Sequence[tuple[ToolRuns, Admitted, Outcome | OutcomeOf, Retrier]]
    ) -> list[Exception | None]:
        errors: list[Exception | None] = [None] * len(calls)
        posting: list[_Posting] = []
        for at, (runs, admitted, outcome, retry) in enumerate(calls):
            try:
                made = outcome if isinstance(outcome, Outcome) else outcome()
                post = runs._reported(admitted, made, retry)
            except Exception as exc:
                errors[at] = exc
                continue
            if post is not None:
                posting.append((at, runs, admitted, post))
        with _in_spans([admitted.span for _, _, admitted, _ in posting]):
            posted = _round_trips(posting, lambda entry: entry[1]._deps.reporter, _post_all)
        for (at, _, admitted, post), reply in zip(posting, posted, strict=True):
            if isinstance(reply, Exception):
                tracing.finish(admitted.span, error=type(reply).__name__)
                errors[at] = reply
            else:
                end_run_span(admitted.span, post.result)
        return errors

    def _opened(self, request: Any, call: Any, signature: Any) -> Admitted | None:
        """The call checked, its span started and its secrets opened; None when it was
        malformed or refused (the refusal posted where it has somewhere to go, its span
        ended)."""
        admitted = self._received(request, call, signature)
        if admitted is None:
            return None
        if not self._retry_sent(admitted):
            return _cleared(admitted.span, None)
        with _in_span(admitted.span):
            opening = self._open(admitted)
        return _cleared(admitted.span, opening)

    def _settled(self, admitted: Admitted, delivery: Delivery | Exception) -> Admitted | None:
        """The opened call cleared to run given its delivery's count (or the error counting
        it, raised here); None, its span ended, when it was lost too often or closed."""
        with _in_span(admitted.span):
            if isinstance(delivery, Exception):
                raise delivery
            guard = self._deps.deliveries
            if delivery is not None and guard is not None and guard.claims and delivery[0] > 0:
                admitted = dataclasses.replace(admitted, claimed=True)
            try:
                cleared = self._settle(admitted, delivery)
            except BaseException:
                self.settle(admitted)
                raise
        if not isinstance(cleared, Admitted):
            self.settle(admitted)  # not run
        return _cleared(admitted.span, cleared)

    def _reported(self, admitted: Admitted, outcome: Outcome, retry: Retrier) -> Post | None:
        """`_report` in the call's span; its span ended when there is nothing to post."""
        with _in_span(admitted.span):
            post = self._report(admitted, outcome, retry)
        if post is None:
            end_run_span(admitted.span, None)
        return post

    def _received(self, request: Any, call: Any, signature: Any) -> Admitted | None:
        """The call's envelope checked (with a fleet key: its signature) and its run's
        span started; None if malformed or refused."""
        task = self._task
        try:
            envelope = read_call(task, call, signature, self._deps.signer)
        except RefusedCall as exc:
            # Not answered: where to reply is what a forger would choose.
            log.error(
                "refused a message of task %s (id %s), the tool did not run: %s",
                task,
                getattr(request, "id", None),
                exc,
            )
            return None
        except ValidationError as exc:
            # Nothing to answer: without a valid envelope we do not know where to reply.
            log.error("rejected a malformed call envelope for %s: %s", self.tool.name, exc)
            return None
        settings = self._deps.settings
        span = run_span(self.tool.name, envelope, request, self._pool, settings.secret_arg_names)
        delivery_info = getattr(request, "delivery_info", None) or {}
        return Admitted(
            envelope,
            span,
            request.retries + 1,
            request.hostname or "unknown",
            bool(delivery_info.get("redelivered")),
            sealed=not isinstance(call, str) or may_hold_sealed(call),
        )

    def _retry_sent(self, admitted: Admitted) -> bool:
        """Whether a retry's delivery is one a worker sent (with a fleet key; a first
        attempt always is): else it is logged and dropped, not answered, as a refused
        call is."""
        guard, retries = self._deps.deliveries, admitted.attempt - 1
        if retries == 0 or self._deps.signer is None or guard is None:
            return True
        if retries > 0 and guard.retried(admitted.envelope, retries):
            return True
        log.error(
            "refused a message of task %s (call %s), the tool did not run: its retries "
            "header says %d, but no worker retried the call so: a copy of its message "
            "with the header changed",
            self._task,
            admitted.envelope.call_id,
            retries,
        )
        return False

    def _open(self, admitted: Admitted) -> Admitted | ToolResult | None:
        """The admitted call with its state loaded (when stored apart) and its secrets
        opened; or the refusal posted when either cannot be; None when it was closed
        already (its state gone with it)."""
        deps, envelope, sealed = self._deps, admitted.envelope, admitted.sealed
        if envelope.state_ref is not None:
            state = deps.snapshots.load(envelope) if deps.snapshots is not None else None
            if state is None and deps.completions.is_closed(PendingCall.starting(envelope)):
                # Held past its deadline: the model was told already, nothing is posted.
                self._answered_already(envelope)
                return None
            if state is None:
                log.error(
                    "call %s (%s) not run: its state snapshot %s is gone", envelope.call_id,
                    self.tool.name, envelope.state_ref,
                )  # fmt: skip
                refused = error_result(
                    envelope, "StateUnavailable", STATE_REFUSAL, worker=admitted.worker
                )
                deps.reporter.post(envelope.reply_to, refused)
                return refused
            envelope = envelope.model_copy(update={"state": state.values, "state_ref": None})
            sealed = sealed or state.may_hold_sealed
        try:
            if sealed:
                envelope = unsealed(envelope, deps.sealer, deps.settings.secret_arg_names)
        except SealError as exc:
            log.error("call %s (%s) not run: %s", envelope.call_id, self.tool.name, exc)
            worker = admitted.worker
            refused = error_result(envelope, "SealedArgumentError", SEAL_REFUSAL, worker=worker)
            deps.reporter.post(envelope.reply_to, refused)
            return refused
        return Admitted(
            envelope,
            admitted.span,
            admitted.attempt,
            admitted.worker,
            admitted.redelivered,
            sealed=False,
        )

    def _settle(self, admitted: Admitted, delivery: Delivery) -> Admitted | ToolResult | None:
        """The admitted call, given its delivery's count (None: not counted): or the answer
        posted when it was lost too often, or None when it was closed already."""
        deps, tool = self._deps, self.tool
        envelope, worker, attempt = admitted.envelope, admitted.worker, admitted.attempt
        closed: bool | None = None  # None: not checked yet
        if delivery is not None:
            count, closed = delivery
            if deps.deliveries is not None and deps.deliveries.exhausted(count) and not closed:
                log.error(
                    "call %s (%s) delivered %d times, its worker lost each time: not run again",
                    envelope.call_id,
                    tool.name,
                    count - 1,
                )
                lost = worker_lost(envelope, count - 1, worker=worker, attempt=attempt)
                deps.reporter.post(envelope.reply_to, lost, ticket=self._ticket(envelope, None))
                return lost
        # A closed call was answered already (it timed out waiting in the queue, say):
        # running it now would act on a call the model was told did not happen. A
        # long-running call opens its ticket in the same step as that check, before it
        # runs: a job the tool starts may post its result at once.
        if tool.is_long_running and not closed:
            opened = PendingCall.starting(envelope, answered_by_user=tool.answered_by_user)
            closed = not deps.completions.register(opened)
        elif closed is None:
            closed = deps.completions.is_closed(PendingCall.starting(envelope))
        if closed:
            self._answered_already(envelope)
            return None
        return admitted

    def _answered_already(self, envelope: ToolCall) -> None:
        """Log that `envelope`'s call is dropped unrun: the orchestrator closed it (or, for a
        long-running call, an earlier delivery ran it and opened its ticket)."""
        log.warning(
            "call %s (%s) was answered before it started (timed out?)%s: not run",
            envelope.call_id,
            self.tool.name,
            ", or ran already and opened its ticket" if self.tool.is_long_running else "",
        )

    def _report(self, admitted: Admitted, outcome: Outcome, retry: Retrier) -> Post | None:
        """The result to post (None: none, the call was stopped); `retry` raises Celery's
        Retry when the tool is to run again."""
        deps, tool, options = self._deps, self.tool, self.tool.options
        envelope = admitted.envelope
        error = outcome.exception
        if isinstance(error, CallStopped):
            log.info("call %s (%s) stopped: its session was cancelled", envelope.call_id, tool.name)
            return None  # the orchestrator answered it (Cancelled) and closed it
        retries = admitted.attempt - 1
        retries_left = retries < options.max_retries
        if isinstance(error, Exception) and isinstance(error, options.retry_on) and retries_left:
            countdown = options.retry_backoff_s * (2**retries)
            log.warning(
                "tool %s raised %s; retry %d of %d in %.1fs",
                tool.name,
                type(error).__name__,
                admitted.attempt,
                options.max_retries,
                countdown,
            )
            if deps.deliveries is not None:  # the retry's delivery is then let in
                deps.deliveries.allow_retry(envelope, admitted.attempt)
            retry(countdown, _shown_error(error, envelope, deps.settings.secret_arg_names))
        result = outcome.result
        result.traceparent = tracing.traceparent(admitted.span)
        with guarded():
            recorded = metrics()
            ran = recorded.labelled(
                recorded.tool_run_seconds, tool.name, self._pool, result.status.value
            )
            ran.observe(result.duration_s)
        closes = None
        ticket = self._ticket(envelope, result)
        if ticket is None and not result.actions.waits():
            # The call's final answer closes it, in the step that posts it: if this
            # process dies before the broker's ack, the redelivered message does not run
            # the tool again - whether or not the orchestrator stored the answer by then.
            # (A call that asked for a credential or a confirmation runs again once they
            # are given: it stays open.)
            closes = Keys(deps.settings.key_prefix).closed(envelope.session_key, envelope.call_id)
        return Post(envelope.reply_to, result, closes, ticket)

    def _ticket(self, envelope: ToolCall, result: ToolResult | None) -> TicketWrite | None:
        """What posting a long-running call's `result` does to the ticket this worker
        opened: keeps the tool's initial response when it answered pending, else takes
        the ticket back (None for any other tool)."""
        if not self.tool.is_long_running:
            return None
        if result is None or result.status is not CallStatus.PENDING:
            return self._deps.completions.ticket_write(PendingCall.starting(envelope), opened=False)
        ticket = PendingCall.starting(
            envelope,
            result.response,
            result.traceparent,
            answered_by_user=self.tool.answered_by_user,
        )
        return self._deps.completions.ticket_write(ticket, opened=True)


# A call of a batch admitted up to its count (its index in the batch), or one to post.
_Opened = tuple[int, ToolRuns, Admitted]
_Posting = tuple[int, ToolRuns, Admitted, Post]


def _in_span(span: Span | None) -> AbstractContextManager[None]:
    """`span` as the current one in the block; an exception leaving the block (Celery's
    Retry too: this attempt ends) ends the span with its type. Without a span (tracing
    off) there is nothing to do: a context built once (a call enters four)."""
    return _NO_SPAN if span is None else _span_block(span)


_NO_SPAN: AbstractContextManager[None] = nullcontext()


@contextmanager
def _span_block(span: Span) -> Iterator[None]:
    try:
        with tracing.current(span):
            yield
    except BaseException as exc:
        tracing.finish(span, error=type(exc).__name__)
        raise


@contextmanager
def _in_spans(spans: Sequence[Span | None]) -> Iterator[None]:
    """`_in_span` for the calls of a round trip: a lone call's span is the current one in
    the block (several calls': none); an exception leaving the block ends each span."""
    lone = spans[0] if len(spans) == 1 else None
    try:
        with tracing.current(lone):
            yield
    except BaseException as exc:
        for span in spans:
            tracing.finish(span, error=type(exc).__name__)
        raise


def _end_when_done(gate: Gate, turn: Turn, still_running: Future[Any] | None) -> None:
    """Give the call's slot back now, or - its tool still running on the thread it was
    given up on at its time limit - once that thread ends: a limit counts what runs."""
    if still_running is None:
        gate.end(turn)
    else:
        still_running.add_done_callback(lambda _: gate.end(turn))


def _count_all(guard: DeliveryGuard, entries: list[_Opened]) -> list[tuple[int, bool] | Exception]:
    """The delivery counts of opened calls, each with its redelivery flag (with claims, a
    first delivery claims its call). A lone call is counted as `DeliveryGuard.count`
    counts it, with the counts other threads of this process make at the same moment; a
    batch (an io worker's) in one round trip of its own."""
    if len(entries) == 1:
        ((_, _, admitted),) = entries
        retries = admitted.attempt - 1
        redelivered = admitted.redelivered
        return [guard.count(admitted.envelope, retries, admitted.worker, redelivered=redelivered)]
    return guard.count_all(
        [(a.envelope, a.attempt - 1, a.worker, a.redelivered) for *_, a in entries]
    )


def _post_all(reporter: ResultReporter, entries: list[_Posting]) -> list[str | Exception]:
    """The entry ids of posted results (or their errors). A lone result is sent as
    `ResultReporter.post` sends it, with the results other threads of this process post at
    the same moment; a batch's in one round trip of its own."""
    if len(entries) == 1:
        ((*_, post),) = entries
        return [reporter.send(post)]
    return reporter.post_all([post for *_, post in entries])


class MaskedToolError(Exception):
    """A tool's exception as Celery logs a retry of it and Flower shows it, when its
    message quoted a secret: its type's name and its message masked."""


def _shown_error(error: Exception, call: ToolCall, secret_names: Sequence[str]) -> Exception:
    """`error`, or a MaskedToolError in its place when its message holds a secret of
    `call`'s."""
    text = str(error)
    shown = masked_secrets(text, call, secret_names)
    return error if shown == text else MaskedToolError(f"{type(error).__name__}: {shown}")


def celery_retry(task: Task[Any, Any]) -> Retrier:
    """How a task retries its call: Celery's `retry`, with the request it runs. The retry's
    message shows Flower what the call's did (its arguments masked, the call's ids):
    Celery's own would show the whole envelope, secret-named arguments and all."""

    def retry(countdown: float, exc: Exception) -> NoReturn:
        request = task.request
        raise task.retry(  # type: ignore[call-arg]  # apply_async's options; unstubbed
            countdown=countdown,
            exc=exc,
            argsrepr=getattr(request, "argsrepr", None) or "()",
            kwargsrepr=getattr(request, "kwargsrepr", None) or "{...}",
        )

    return retry


Entry = TypeVar("Entry")
Sender = TypeVar("Sender")
Reply = TypeVar("Reply")


def _round_trips(
    entries: Sequence[Entry],
    sender: Callable[[Entry], Sender | None],
    send: Callable[[Sender, list[Entry]], list[Reply | Exception]],
) -> list[Reply | Exception | None]:
    """The replies for `entries`, sent one round trip per sender (the tools of a worker
    share theirs); None for an entry without one. A round trip that raised (the
    connection) gives its error to each of its entries: none is known to be done."""
    replies: list[Reply | Exception | None] = [None] * len(entries)
    groups: dict[int, tuple[Sender, list[int]]] = {}
    for at, entry in enumerate(entries):
        found = sender(entry)
        if found is not None:
            groups.setdefault(id(found), (found, []))[1].append(at)
    for found, indices in groups.values():
        try:
            answers = send(found, [entries[at] for at in indices])
        except Exception as exc:
            answers = [exc] * len(indices)
        for at, answer in zip(indices, answers, strict=True):
            replies[at] = answer
    return replies


def _cleared(span: Span | None, cleared: Admitted | ToolResult | None) -> Admitted | None:
    """The call cleared to run; or None, its run's span ended, when it was answered or
    closed already."""
    if isinstance(cleared, Admitted):
        return cleared
    end_run_span(span, cleared)
    return None
