"""Run one tool for one call envelope and turn the outcome into a ToolResult."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from toolfleet.shared.cancellation import cancelled_response
from toolfleet.shared.confirmation_check import refusal_to_run
from toolfleet.shared.context import ToolContext, ToolServices
from toolfleet.shared.errors import ToolError
from toolfleet.shared.json_depth import DEFAULT_MAX_JSON_DEPTH, too_deep, value_depth
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult, error_response
from toolfleet.shared.redaction import mask_values, secret_values
from toolfleet.shared.tools import FunctionTool
from toolfleet.shared.unicode_text import without_lone_surrogates
from toolfleet.workers.call_loop import CallStopped, CallTimeLimit, call_loop

log = logging.getLogger(__name__)

# State values must survive json.dumps: the orchestrator stores each one with it.
_ADVICE = (
    "write only JSON values (str, int, float, bool, None, and lists and dicts of them) "
    "to tool_context.state: convert others first (a datetime with .isoformat(), say)"
)
# How many of the largest state keys an over-limit message names.
_NAMED_KEYS = 5


def _signals_reach_us() -> bool:
    """Whether Celery's time limits can interrupt this thread: they are signals, handled on
    the main thread, where prefork and solo pools run tasks. A threads-pool thread is never
    interrupted, so there the executor keeps each call's limit itself."""
    return threading.current_thread() is threading.main_thread()


# The helper thread of the sync call this thread gave up on at its time limit, still
# running (`_call_sync`): what holds the call's fleet-wide slot holds it until it ends.
_abandoned = threading.local()


def abandoned_run() -> Future[Any] | None:
    """The run of the sync call this thread gave up on at its time limit: done once its
    helper thread ends. None if the last call this thread ran was not given up on."""
    run: Future[Any] | None = getattr(_abandoned, "run", None)
    _abandoned.run = None
    return run


def _call_sync(func: Callable[..., Any], args: dict[str, Any], time_limit_s: float) -> Any:
    """Call a sync tool. On the main thread directly (Celery's limits interrupt it); on a
    pool thread on a helper thread of its own, waited for up to `time_limit_s`: past it the
    call is answered (CallTimeLimit) and the helper thread is abandoned, still running -
    Python cannot stop a thread."""
    if _signals_reach_us() or time_limit_s <= 0:
        return func(**args)
    done: Future[Any] = Future()

    def target() -> None:
        try:
            done.set_result(func(**args))
        except BaseException as exc:  # the tool's own: reported as its call's outcome
            done.set_exception(exc)

    threading.Thread(target=target, name="toolfleet-sync-call", daemon=True).start()
    wait([done], timeout=time_limit_s)
    if not done.done():
        _abandoned.run = done
        raise CallTimeLimit(time_limit_s)
    return done.result()


@dataclass(frozen=True)
class Outcome:
    """The result to report, and the exception that caused an error result (for retries)."""

    result: ToolResult
    exception: BaseException | None = None


# What makes a coroutine call's Outcome once it has ended (`start_coroutine`).
OutcomeOf = Callable[[], Outcome]


def masked_secrets(text: str, call: ToolCall, secret_names: Sequence[str]) -> str:
    """`text` with the values of `call`'s secret-named arguments and state masked: a
    tool's error message that quotes one (a URL with its key, a failed login) goes to the
    results stream, the session's events, the logs and Flower."""
    if not secret_names:
        return text
    return mask_values(text, secret_values((call.args, call.state), secret_names))


class Execution:
    """One run of `tool` for `call` in this worker process, from its checked arguments to
    the Outcome that describes how it ended."""

    def __init__(
        self,
        tool: FunctionTool,
        call: ToolCall,
        *,
        worker: str,
        attempt: int,
        max_result_bytes: int,
        services: ToolServices | None,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        secret_names: Sequence[str] = (),
    ) -> None:
        self.tool = tool
        self.call = call
        self._secret_names = secret_names
        self._worker = worker
        self._attempt = attempt
        self._max_result_bytes = max_result_bytes
        self._max_json_depth = max_json_depth
        self.started = time.time()
        self.context = ToolContext(call, services)

    def arguments(self) -> dict[str, Any] | Outcome:
        """The tool's keyword arguments, or the InvalidArguments outcome. The orchestrator
        validated them already; a worker trusts nothing it did not check."""
        limit = self._max_json_depth
        if value_depth(self.call.args, stop_above=limit) > limit:  # validating recurses
            message = too_deep(f"the arguments of {self.tool.name!r}", limit)
            return self.finish(CallStatus.ERROR, error_response("InvalidArguments", message))
        args, problems = self.tool.validate(self.call.args)
        if problems:  # a problem quotes the value it found: a secret argument's is masked
            detail = self.masked("; ".join(str(p) for p in problems))
            return self.finish(CallStatus.ERROR, error_response("InvalidArguments", detail))
        # Whoever sent it: a call that needs a person's confirmation runs only with one.
        refused = refusal_to_run(self.tool, self.call, args)
        if refused is not None:
            return self.finish(CallStatus.ERROR, error_response("ConfirmationRequired", refused))
        if self.tool.signature.context_param:
            args[self.tool.signature.context_param] = self.context
        return args

    def returned(self, value: Any, finished_at: float | None = None) -> Outcome:
        """The outcome of a tool that returned `value` (at `finished_at`; None: now)."""
        status = CallStatus.PENDING if self.tool.is_long_running else CallStatus.SUCCESS
        if isinstance(value, dict):
            return self.finish(status, value, finished_at=finished_at)
        return self.finish(status, {"result": value}, wrapped=True, finished_at=finished_at)

    def raised(
        self, exc: BaseException, time_limit_s: float, finished_at: float | None = None
    ) -> Outcome:
        """The outcome of a tool that raised `exc` (a time limit, a stop, its own error) at
        `finished_at` (None: now); a BaseException that is not an Exception (an
        interruption) is raised again."""
        name = self.tool.name
        if isinstance(exc, ToolError):
            response = error_response("ToolError", self.masked(str(exc)))
            return self.finish(CallStatus.ERROR, response, exc, finished_at=finished_at)
        if isinstance(exc, CallStopped):  # answered by the orchestrator already: not reported
            response = cancelled_response(name)
            return self.finish(CallStatus.ERROR, response, exc, finished_at=finished_at)
        if isinstance(exc, SoftTimeLimitExceeded | CallTimeLimit):
            message = f"tool {name!r} exceeded its time limit of {time_limit_s:g} s"
            response = error_response("TimeoutError", message)
            return self.finish(CallStatus.ERROR, response, exc, finished_at=finished_at)
        if not isinstance(exc, Exception) and not _the_tools_own(exc):
            raise exc
        self._log_failure(exc)
        response = error_response(type(exc).__name__, self.masked(str(exc)))
        return self.finish(CallStatus.ERROR, response, exc, finished_at=finished_at)

    def ended(
        self, value: Any, error: BaseException | None, time_limit_s: float, finished_at: float
    ) -> Outcome:
        """The outcome of a coroutine call that ended on the call loop at `finished_at`,
        with `value` or `error`. Its task cancelled by none of ours (the tool's coroutine
        cancelled itself) is an error result: no thread of this process was interrupted."""
        if error is None:
            return self.returned(value, finished_at)
        if not isinstance(error, Exception):
            detail = self.masked(str(error)) or "the tool's coroutine was cancelled"
            response = error_response(type(error).__name__, detail)
            return self.finish(CallStatus.ERROR, response, finished_at=finished_at)
        return self.raised(error, time_limit_s, finished_at)

    def masked(self, text: str) -> str:
        """`text` with the values of the call's secret-named arguments and state masked."""
        return masked_secrets(text, self.call, self._secret_names)

    def _log_failure(self, exc: BaseException) -> None:
        """Log the tool's exception with its traceback, the call's secrets masked."""
        name, call_id = self.tool.name, self.call.call_id
        text = "".join(traceback.format_exception(exc))
        shown = self.masked(text)
        if shown == text:  # nothing to mask: the handler formats it, as any other
            log.error("tool %s failed (call %s)", name, call_id, exc_info=exc)
        else:
            log.error("tool %s failed (call %s)\n%s", name, call_id, shown.rstrip())

    def finish(
        self,
        status: CallStatus,
        response: dict[str, Any],
        exc: BaseException | None = None,
        *,
        wrapped: bool = False,
        finished_at: float | None = None,
    ) -> Outcome:
        """The outcome with this status and response, unless they cannot be sent; the call
        finished at `finished_at` (None: now)."""
        call = self.call
        state_delta = self.context.state.delta
        try:
            problem = self._problem(response, state_delta)
        except UnicodeEncodeError:  # text UTF-8 cannot carry: its lone surrogates replaced
            log.warning(
                "tool %s returned text with lone surrogates (call %s): sent with U+FFFD in "
                "their place; decode bytes with errors='replace' to choose the text",
                call.tool,
                call.call_id,
            )
            response = without_lone_surrogates(response)
            state_delta = without_lone_surrogates(state_delta)
            problem = self._problem(response, state_delta)
        if problem:
            log.error(
                "tool %s returned an unsendable result (call %s): %s",
                call.tool,
                call.call_id,
                problem,
            )
            if status is CallStatus.ERROR:  # keep what the model would have been told
                problem += f" (the call failed too: {response.get('error_type')}: "
                problem += f"{response.get('error_message')})"
            status, response = CallStatus.ERROR, error_response("ResultRejected", problem)
            state_delta, exc = {}, None  # nothing of it travels; running again would not help
            wrapped = False
        result = ToolResult(
            call_id=call.call_id,
            tool=call.tool,
            session_id=call.session_id,
            invocation_id=call.invocation_id,
            status=status,
            response=response,
            wrapped=wrapped,
            state_delta=state_delta,
            actions=self.context.actions,
            worker=self._worker,
            pid=os.getpid(),
            started_at=self.started,
            finished_at=time.time() if finished_at is None else finished_at,
            attempt=self._attempt,
        )
        return Outcome(result, exc)

    def _problem(self, response: dict[str, Any], state_delta: dict[str, Any]) -> str | None:
        """Why the result cannot be sent, or None; raises UnicodeEncodeError when it holds
        text UTF-8 cannot encode."""
        return _too_deep(response, state_delta, self._max_json_depth) or _unsendable(
            response, state_delta, self._max_result_bytes
        )


def execute(
    tool: FunctionTool,
    call: ToolCall,
    *,
    worker: str,
    attempt: int = 1,
    max_result_bytes: int,
    time_limit_s: float = 0.0,
    services: ToolServices | None = None,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    secret_names: Sequence[str] = (),
) -> Outcome:
    """Run `tool` for `call` in this worker process and describe the outcome as a ToolResult.

    Arguments are validated again here; coroutine tools run on this process's call loop
    (shared by the calls of an io worker), and no task of theirs is left on it afterwards;
    each call keeps its own `time_limit_s` (0: none), on a pool thread too. Exceptions
    become ERROR results (the exception kept for retries), as do a time limit and a
    response or state writes that are not JSON, nested over `max_json_depth` or together
    over `max_result_bytes` (ResultRejected, no state delta); an exception's message and
    logged traceback have the values under `secret_names` masked. A long-running tool's
    response is PENDING: its ticket."""
    execution = Execution(
        tool,
        call,
        worker=worker,
        attempt=attempt,
        max_result_bytes=max_result_bytes,
        services=services,
        max_json_depth=max_json_depth,
        secret_names=secret_names,
    )
    return run_execution(execution, time_limit_s)


def _the_tools_own(exc: BaseException) -> bool:
    """Whether an exit or interrupt came from the tool itself (`sys.exit()` in a tool):
    raised on a thread other than the main one, it is - signals reach the main thread
    only - and the call is answered with it as an error, as any exception of the tool's.
    On the main thread (a prefork child's) it stops the process, as it would anywhere."""
    return isinstance(exc, SystemExit | KeyboardInterrupt) and (
        threading.current_thread() is not threading.main_thread()
    )


def run_execution(execution: Execution, time_limit_s: float, waited_s: float = 0.0) -> Outcome:
    """Run `execution` on this thread to its Outcome (see `execute`). `waited_s`: how long
    the call waited for its fleet-wide limits' turn, which counts toward its limit (as
    Celery's limit counts it on prefork): on a pool thread nothing else stops a call that
    would run a whole limit after a long wait, past the orchestrator's deadline, holding
    its slot. A call whose wait took its whole limit does not start."""
    tool, call = execution.tool, execution.call
    args = execution.arguments()
    if isinstance(args, Outcome):
        return args
    left_s = time_limit_s - waited_s if time_limit_s else 0
    try:
        if time_limit_s and left_s <= 0:
            raise CallTimeLimit(time_limit_s)
        if tool.is_async:
            value = call_loop().run(tool.func(**args), left_s, call.call_id)
        else:
            value = _call_sync(tool.func, args, left_s)
            if asyncio.iscoroutine(value):  # a sync wrapper of a coroutine function
                ran_s = time.time() - execution.started
                left = max(left_s - ran_s, 0.001) if time_limit_s else 0
                value = call_loop().run(value, left, call.call_id)
    except BaseException as exc:
        return execution.raised(exc, time_limit_s)
    return execution.returned(value)


def start_coroutine(
    execution: Execution,
    time_limit_s: float,
    on_end: Callable[[OutcomeOf], None],
    wrap: Callable[[Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]] | None = None,
) -> None:
    """Start an async tool's call on this process's call loop and return at once; no thread
    waits for it. `on_end` gets what makes its Outcome, on the loop's thread (or on this
    one, if its arguments are refused): the step that concludes the call makes it, not
    the loop, which starts the next calls meanwhile. `wrap`: what runs the tool's
    coroutine (its limits' wait)."""
    args = execution.arguments()
    if isinstance(args, Outcome):
        refused = args
        on_end(lambda: refused)
        return

    def ended(value: Any, error: BaseException | None) -> None:
        finished_at = time.time()
        try:
            on_end(partial(execution.ended, value, error, time_limit_s, finished_at))
        except BaseException:  # on the loop's thread: log it, never raise into the loop
            log.exception("concluding call %s failed", execution.call.call_id)

    call_id = execution.call.call_id
    coro = execution.tool.func(**args)
    call_loop().start(coro if wrap is None else wrap(coro), time_limit_s, call_id, ended)


def _too_deep(response: dict[str, Any], state_delta: dict[str, Any], limit: int) -> str | None:
    """Why a result may not be posted for its nesting, or None. Measured first: sizing,
    masking and sending it all recurse, and a value that contains itself never ends."""
    if value_depth(response, stop_above=limit) > limit:
        return too_deep("the tool's result", limit) + "; return flatter data"
    for key, value in state_delta.items():
        if value_depth(value, stop_above=limit) > limit:
            return too_deep(f"the state write {key!r}", limit) + "; write flatter data"
    return None


def _json_size(value: Any) -> int:
    """The size of `value` as sent (UTF-8 JSON); UnicodeEncodeError for a lone surrogate."""
    return len(json.dumps(value, ensure_ascii=False).encode())


def _unstorable(state_delta: dict[str, Any]) -> list[str]:
    """Each state key whose write cannot be sent and stored, with why."""
    bad = []
    for key, value in state_delta.items():
        if not isinstance(key, str):
            bad.append(f"{key!r} (a key must be a string)")
            continue
        try:
            _json_size(value)
        except UnicodeEncodeError:
            raise
        except (TypeError, ValueError) as exc:
            bad.append(f"{key!r} ({exc})")
    return bad


def _unsendable(response: dict[str, Any], state_delta: dict[str, Any], limit: int) -> str | None:
    """Why a result cannot be posted, or None: its response or a state write is not JSON, or
    both together are over `limit` bytes.

    One limit for the two together, not one each: they travel in one message, and the
    state writes are then copied into every later call's envelope. Counted apart, a tool
    could send twice the limit, or get past it by moving data from its response to state."""
    odd_keys = [key for key in response if not isinstance(key, str)]
    if odd_keys:  # JSON would write them as text; a ToolResult does not take them
        shown = ", ".join(repr(key) for key in odd_keys[:5])
        return f"the tool's result has keys that are not strings ({shown}): key it by strings"
    try:
        response_size = _json_size(response)
    except UnicodeEncodeError:
        raise
    except (TypeError, ValueError) as exc:
        return f"the tool's result is not JSON-serializable: {exc}"
    try:
        # A key that is not a string would not even make a ToolResult.
        storable = all(isinstance(key, str) for key in state_delta)
        state_size = _json_size(state_delta) if storable and state_delta else 0
    except UnicodeEncodeError:
        raise
    except (TypeError, ValueError):
        storable = False
    if not storable:
        bad = ", ".join(_unstorable(state_delta))
        return f"the tool's state writes are not JSON-serializable: {bad}; {_ADVICE}"
    size = response_size + state_size
    if size <= limit:
        return None
    if not state_size:
        return f"the tool's result is {size} bytes, over the {limit}-byte limit; return less data"
    by_size = sorted(((_json_size(v), k) for k, v in state_delta.items()), reverse=True)
    named = ", ".join(f"{k!r} {n} bytes" for n, k in by_size[:_NAMED_KEYS])
    more = f" and {len(by_size) - _NAMED_KEYS} more" if len(by_size) > _NAMED_KEYS else ""
    return (
        f"the tool's result and state writes are {size} bytes together, over the "
        f"{limit}-byte limit (result {response_size} bytes; state keys {named}{more}); "
        "write less to tool_context.state: keep large data elsewhere (an artifact, say) "
        "and store a reference to it"
    )
