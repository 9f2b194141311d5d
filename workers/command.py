"""Celery's `worker` command for toolfleet's app, without the rest of Celery's command line.

`celery -A toolfleet.workers.app worker ...` loads every command of Celery's and of its
plugins (Flower's web app, the amqp shell's prompt toolkit) before it runs the one asked
for: a quarter of a second or more of each worker's start. `toolfleet worker` and the
workers `toolfleet run` starts run Celery's worker command alone, with the same options:
`python -m toolfleet.workers.command <options>` is `celery -A toolfleet.workers.app
worker <options>`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from celery import Celery

# Where Celery's command line reads the worker's options from in the environment, as
# `celery worker` does (CELERY_WORKER_CONCURRENCY, ...).
ENV_PREFIX = "CELERY_WORKER"


def run_worker(app: Celery, options: Sequence[str], *, standalone: bool = False) -> int:
    """Run Celery's worker command for `app` with `options` (those of `celery worker`);
    its exit status. `standalone`: as a program's main (errors printed, the process
    exited), else errors raise as `app.worker_main`'s do."""
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    context = CLIContext(app=app, no_color=False, workdir=None)
    status = worker.main(
        args=list(options),
        obj=context,
        prog_name="celery worker",
        auto_envvar_prefix=ENV_PREFIX,
        standalone_mode=standalone,
    )
    return int(status or 0)


if __name__ == "__main__":
    from toolfleet.workers import app as worker_app

    sys.exit(run_worker(worker_app.app, sys.argv[1:], standalone=True))
