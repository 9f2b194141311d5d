"""A message due later is kept until then only when its task would run it.

Celery's consumer keeps a message with an ETA (a retry's countdown) in memory until it is
due, and takes another from the broker in its place: a client of the broker that sends
messages due in a year would fill a worker's memory with them, and they would never be
refused. A toolfleet task runs only a call signed with the fleet key, or a job whose
arguments pass their check; any other message is run at once instead, to be refused or
dropped now rather than at its ETA. Messages of other tasks keep Celery's behaviour.
The io workers' intake asks the same before it holds a message in a slot.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from celery import Celery, Task
from celery.signals import task_received

from toolfleet.shared.call_signing import CALL_FIELD, SIGNATURE_FIELD
from toolfleet.shared.celery_wire.parse import header_instant
from toolfleet.workers.tasks import JOB_READABLE
from toolfleet.workers.tool_runs import TOOL_RUNS, ToolRuns

log = logging.getLogger(__name__)


def would_run(task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether `task` would run a message of these arguments: a tool's call signed as the
    fleet key requires, a job's checked arguments; any task of another kind would."""
    runs: ToolRuns | None = getattr(task, TOOL_RUNS, None)
    if runs is not None:
        return runs.readable(kwargs.get(CALL_FIELD), kwargs.get(SIGNATURE_FIELD))
    readable = getattr(task, JOB_READABLE, None)
    return readable is None or bool(readable(args, kwargs))


# How much further than its retry's countdown a call's ETA may be: the clock of the worker
# that sent the retry may be ahead of this one's.
ETA_SLACK_S = 60.0


def due_as_a_retry(task: Task[Any, Any], retries: int, eta: datetime | None) -> bool:
    """Whether a message of `task` due at `eta` is due as one a worker sends: a tool's call
    carries an ETA only as a retry, its countdown away at most (the message's ETA is not
    signed: a copy of a signed call due in a year would otherwise wait that long in a
    slot). A job's (a tool's chosen delay) is as its sender chose."""
    runs: ToolRuns | None = getattr(task, TOOL_RUNS, None)
    if runs is None or eta is None:
        return True
    options = runs.tool.options
    if not 0 < retries <= options.max_retries:
        return False
    countdown = options.retry_backoff_s * 2.0 ** (retries - 1)
    return (eta - datetime.now(UTC)).total_seconds() <= countdown + ETA_SLACK_S


def install_eta_guard(app: Celery) -> None:
    """Run at once, rather than keep until its ETA, each message that `app`'s worker
    receives with an ETA and would not run (Celery's signals are global: receivers
    ignore workers of other apps in this process)."""

    @task_received.connect(weak=False)
    def _on_received(sender: Any = None, request: Any = None, **_: Any) -> None:
        if request is None or request.eta is None or getattr(sender, "app", None) is not app:
            return
        kwargs = request.kwargs if isinstance(request.kwargs, Mapping) else {}
        args = request.args if isinstance(request.args, Sequence) else ()
        try:
            eta = header_instant(request.eta)
            kept = would_run(request.task, args, kwargs) and due_as_a_retry(
                request.task, _retries(request), eta
            )
        except Exception:  # what no task reads is not kept for a year either
            log.exception("task %s[%s]: could not read its message", request.name, request.id)
            kept = False
        if kept:
            return
        log.warning(
            "task %s[%s] is due at %s but would not run: run now, to be refused, not kept",
            request.name,
            request.id,
            request.eta,
        )
        # Celery reads the ETA once the receivers returned; none: it runs now.
        request._eta = None


def _retries(request: Any) -> int:
    """The retries header of the message a Celery Request was made from (it keeps the
    headers in its request dict, not as an attribute)."""
    headers = getattr(request, "request_dict", None)
    if not isinstance(headers, Mapping):
        return 0
    return int(headers.get("retries") or 0)
