"""Background jobs: work a long-running tool starts and that finishes later.

A job is a plain function run as the Celery task `job.<name>` on a pool's queue.
Tools schedule one with `tool_context.schedule_job(job, delay_s=..., **kwargs)`;
a job that declares `job_context: JobContext` can post the final result of the
call that started it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolfleet.shared.errors import ToolDefinitionError

JOB_TASK_PREFIX = "job."


@dataclass(frozen=True, eq=False)
class Job:
    """A function run in the background as the Celery task `job.<name>` on `pool`'s queue.

    Made with `@job(pool=...)`.

    Attributes:
        func: The function; it runs on a worker of `pool` with the keyword arguments the
            tool scheduled it with.
        pool: The pool whose workers run it; default `"default"`.
        name: The task's name after `job.`; default: the function's name.

    Raises:
        ToolDefinitionError: The name is not an identifier.
    """

    func: Callable[..., Any]
    pool: str = "default"
    name: str = field(default="")

    def __post_init__(self) -> None:
        name = self.name or getattr(self.func, "__name__", "")
        if not name.isidentifier():
            raise ToolDefinitionError([f"job name {name!r} is not an identifier"])
        object.__setattr__(self, "name", name)

    @property
    def task_name(self) -> str:
        """The Celery task the job is registered and sent as (`job.<name>`)."""
        return f"{JOB_TASK_PREFIX}{self.name}"

    @property
    def wants_context(self) -> bool:
        """Whether the function declares a `job_context` parameter, to be given a JobContext."""
        return "job_context" in inspect.signature(self.func).parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function here and now, not as a background task."""
        return self.func(*args, **kwargs)


def job(pool: str = "default") -> Callable[[Callable[..., Any]], Job]:
    """`@job(pool="tickets")` makes a function schedulable from tools.

    Args:
        pool: The pool whose workers run the job; default `"default"`.

    Returns:
        A decorator that makes the function a `Job` named after it.
    """

    def wrap(func: Callable[..., Any]) -> Job:
        return Job(func, pool)

    return wrap


class JobScheduler(Protocol):
    """Sends a job to its pool's queue to run later; workers build one on their Celery app."""

    def __call__(self, job: Job, delay_s: float, kwargs: dict[str, Any]) -> None:
        """Have `job(**kwargs)` run on its pool's workers in `delay_s` seconds."""
        ...


class PostResult(Protocol):
    """Posts a result for a pending long-running call (Completions.post_result)."""

    def __call__(self, call_id: str, response: dict[str, Any], *, final: bool = True) -> None:
        """Post `response` for `call_id`: its final result, or progress if not `final`."""
        ...


@dataclass(frozen=True)
class JobContext:
    """Given to a job that asks for it: post results for pending calls.

    Attributes:
        post_result: Posts a response for a pending long-running call:
            `post_result(call_id, response, final=True)`; progress when `final` is False.
    """

    post_result: PostResult
