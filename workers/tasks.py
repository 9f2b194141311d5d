"""Celery tasks: `tool.<name>` per tool (decode, execute, report) and `job.<name>` per job."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Celery, Task
from celery.utils.saferepr import saferepr

from toolfleet.shared.celery_config import tool_pool, tool_time_limit
from toolfleet.shared.completions import Completions
from toolfleet.shared.job_signing import JobSigner, RefusedJob, job_message, read_job
from toolfleet.shared.jobs import Job, JobContext, JobScheduler, PostResult
from toolfleet.shared.keys import queue_name, task_name
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
    app: Celery, jobs: dict[str, Job], completions: Completions, signer: JobSigner | None = None
) -> None:
    """`job.<name>` tasks: background work started by long-running tools. With `signer`
    (a fleet key) a job runs only from a message a worker of the fleet signed."""
    context = JobContext(post_result=result_poster(completions, "job"))
    for found in jobs.values():
        app.task(
            name=found.task_name,
            bind=True,
            queue=queue_name(found.pool),
            acks_late=True,
            shared=False,
        )(_job_runner(found, context, signer))


def _job_runner(job: Job, context: JobContext, signer: JobSigner | None) -> Callable[..., None]:
    """The body of `job`'s task: its message checked, then the job run."""

    # The signed form comes as positional arguments; the unsigned one as keywords.
    def run_job(self: Task[Any, Any], *args: Any, **kwargs: Any) -> None:
        try:
            fields = read_job(job.task_name, args, kwargs, signer)
        except RefusedJob as exc:
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


def make_scheduler(app: Celery, signer: JobSigner | None = None) -> JobScheduler:
    """The job scheduler of tool services: sends `job.<name>` to the job's pool queue, to run
    `delay_s` seconds later (a Celery countdown), signed with `signer` (a fleet key).
    Flower shows the job's keyword arguments, signed or not."""
    maxsize = app.amqp.kwargsrepr_maxsize

    def schedule(job: Job, delay_s: float, kwargs: dict[str, Any]) -> None:
        args, sent = job_message(job.task_name, kwargs, signer)
        app.send_task(
            job.task_name,
            args=args,
            kwargs=sent,
            queue=queue_name(job.pool),
            countdown=delay_s,
            argsrepr="()",
            kwargsrepr=saferepr(kwargs, maxsize),
        )

    return schedule


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
