"""Celery tasks: `tool.<name>` per tool (decode, execute, report) and `job.<name>` per job."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from celery import Celery, Task
from celery.utils.saferepr import saferepr

from toolfleet.shared.celery_config import tool_pool, tool_time_limit
from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.job_signing import JobSigner, RefusedJob, job_message, read_job
from toolfleet.shared.jobs import Job, JobContext, JobScheduler, PostResult
from toolfleet.shared.keys import queue_name, task_name
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, redact_deep
from toolfleet.shared.sealing import Sealer, SealError, unseal
from toolfleet.shared.tools import FunctionTool, ToolRegistry
from toolfleet.workers.tool_runs import TOOL_RUNS, ToolRuns, ToolTaskDeps

log = logging.getLogger(__name__)


def register_tool_tasks(app: Celery, registry: ToolRegistry, deps: ToolTaskDeps) -> None:
    """Register a `tool.<name>` task per tool, on its pool's queue with its time limits.

    Each task checks the envelope (its signature, with a fleet key) and the delivery
    count, registers a long-running call's ticket, runs the tool, retries on the tool's
    `retry_on`, and posts the result to `reply_to`."""
    for tool in registry.values():
        _register_tool(app, tool, deps)


def result_poster(completions: Completions, source: str) -> PostResult:
    """Posts results of pending calls as `source` (jobs; tools whose work goes on)."""

    def post_result(call_id: str, response: dict[str, Any], *, final: bool = True) -> None:
        completions.post_result(call_id, response, final=final, source=source)

    return post_result


def register_job_tasks(
    app: Celery,
    jobs: dict[str, Job],
    completions: Completions,
    signer: JobSigner | None = None,
    sealer: Sealer | None = None,
    secret_names: Iterable[str] = DEFAULT_SECRET_NAMES,
) -> None:
    """`job.<name>` tasks: background work started by long-running tools. With `signer`
    (a fleet key) a job runs only from a message a worker of the fleet signed; `sealer`
    opens the secret-named arguments the scheduler sealed."""
    context = JobContext(post_result=result_poster(completions, "job"))
    opener = _job_opener(sealer, tuple(secret_names))
    for found in jobs.values():
        task = app.task(
            name=found.task_name,
            bind=True,
            queue=queue_name(found.pool),
            acks_late=True,
            shared=False,
        )(_job_runner(found, context, signer, opener))
        setattr(task, JOB_READABLE, _job_readable(found, signer))


# The attribute of a `job.<name>` Celery task that says whether a message's arguments
# (positional, keyword) are ones it would run (`_job_readable`).
JOB_READABLE = "toolfleet_job_readable"


def _job_readable(
    job: Job, signer: JobSigner | None
) -> Callable[[Sequence[Any], Mapping[str, Any]], bool]:
    """Whether a message of `job` with these arguments passes its check: what an io
    worker asks before it holds the message for its ETA."""

    def readable(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        try:
            read_job(job.task_name, args, kwargs, signer)
        except RefusedJob:
            return False
        return True

    return readable


# Opens a job's sealed arguments (SealError when one does not open).
JobOpener = Callable[[dict[str, Any]], dict[str, Any]]


def _job_opener(sealer: Sealer | None, secret_names: tuple[str, ...]) -> JobOpener:
    """Opens what the scheduler sealed with the worker's sealer; without one, a sealed
    value is refused, as a call's."""

    def opened(fields: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = unseal(fields, sealer, secret_names)
        return result

    return opened


def _job_runner(
    job: Job, context: JobContext, signer: JobSigner | None, opener: JobOpener
) -> Callable[..., None]:
    """The body of `job`'s task: its message checked, its secrets opened, then the job
    run."""

    # The signed form comes as positional arguments; the unsigned one as keywords.
    def run_job(self: Task[Any, Any], *args: Any, **kwargs: Any) -> None:
        try:
            fields = opener(read_job(job.task_name, args, kwargs, signer))
        except (RefusedJob, SealError) as exc:
            # Returning acknowledges it: a forged message is dropped, never retried.
            log.error(
                "refused a message of job %s (id %s), the job did not run: %s",
                job.task_name,
                self.request.id,
                exc,
            )
            return
        if job.wants_context:
            fields["job_context"] = context
        job.func(**fields)

    return run_job


def make_scheduler(
    app: Celery,
    signer: JobSigner | None = None,
    sealer: Sealer | None = None,
    secret_names: Iterable[str] = DEFAULT_SECRET_NAMES,
) -> JobScheduler:
    """The job scheduler of tool services: sends `job.<name>` to the job's pool queue, to run
    `delay_s` seconds later (a Celery countdown), its secret-named arguments sealed with
    `sealer` and the message signed with `signer` (a fleet key). Flower shows the job's
    keyword arguments, secret-named ones masked."""
    maxsize = app.amqp.kwargsrepr_maxsize
    names = tuple(secret_names)

    def schedule(job: Job, delay_s: float, kwargs: dict[str, Any]) -> None:
        shown = redact_deep(kwargs, names)
        args, sent = job_message(job.task_name, _sealed_job_args(job, kwargs, sealer), signer)
        app.send_task(
            job.task_name,
            args=args,
            kwargs=sent,
            queue=queue_name(job.pool),
            countdown=delay_s,
            argsrepr="()",
            kwargsrepr=saferepr(shown, maxsize),
        )

    return schedule


def _sealed_job_args(job: Job, kwargs: dict[str, Any], sealer: Sealer | None) -> dict[str, Any]:
    """`kwargs` with their secret-named values sealed (a value shaped like a sealed one
    too: the tool gave it, no orchestrator sealed it); as they are without a sealer."""
    if sealer is None:
        return kwargs
    try:
        sealed: dict[str, Any] = sealer.seal(kwargs, keep_sealed=False)
    except (TypeError, ValueError) as exc:
        raise ToolfleetError(
            f"job {job.name!r}: a secret-named argument is sealed as JSON, and its value "
            f"is not JSON ({exc}); pass it as a string, number, list or dict"
        ) from exc
    return sealed


def _register_tool(app: Celery, tool: FunctionTool, deps: ToolTaskDeps) -> None:
    settings = deps.settings
    limit = tool_time_limit(tool, settings)
    runs = ToolRuns(tool, deps, limit, tool_pool(tool, settings))

    # `call`: the envelope's JSON text (a mapping from an unsigned sender of old); `sig`:
    # its signature. Both are checked before anything is read of them.
    def run_tool(self: Task[Any, Any], call: Any, sig: Any = None) -> None:
        runs.run(self, call, sig)

    task_options: dict[str, Any] = dict(
        name=task_name(tool.name),
        bind=True,
        queue=queue_name(tool_pool(tool, settings)),
        soft_time_limit=limit,
        time_limit=limit + 1,
        acks_late=True,
        ignore_result=True,
        max_retries=tool.options.max_retries,
        # This app's own: a shared task would be added to every Celery app made later in
        # the process (a test's, an embedding program's) and bound there too.
        shared=False,
    )
    task = app.task(**task_options)(run_tool)
    setattr(task, TOOL_RUNS, runs)  # an io worker's intake runs coroutine calls in two steps
