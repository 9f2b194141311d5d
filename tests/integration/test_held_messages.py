"""A prefork worker on Redis keeps the messages it holds taken: a job scheduled to run
later than the visibility timeout runs once. Celery's consumer holds such a message
unacknowledged until it is due; kombu's sweep put back every one taken longer ago than
the timeout, so each sweep made a copy, and each copy ran when due. Real Redis, a real
worker process, a visibility timeout of 3 s standing for the default one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from tests.support import until
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.celery_wire.layout import UNACKED_KEY
from toolfleet.shared.config import Settings
from toolfleet.shared.job_signing import JobSigner, job_message
from toolfleet.shared.jobs import job
from toolfleet.shared.keys import queue_name
from toolfleet.shared.tools import tool

pytestmark = pytest.mark.integration

POOL = "heldjobs"
COUNTER_ENV = "TOOLFLEET_TEST_HELD_COUNTER_URL"
DELAY_S = 8  # past the 3 s visibility timeout, by two sweeps and more


@tool(pool=POOL, timeout_s=1)
def held_noop() -> str:
    """A tool, so that the worker serves the pool."""
    return "ok"


@job(pool=POOL)
def counted_job(key: str) -> None:
    """Counts its runs in Redis."""
    redis.Redis.from_url(os.environ[COUNTER_ENV]).incr(key)


@pytest.fixture
def job_settings(settings: Settings) -> Iterator[Settings]:
    yield settings.model_copy(
        update={
            "tool_modules": [__name__],
            "default_timeout_s": 1,
            "redelivery_margin_s": 1.0,  # visibility timeout: 1 + 1 + 1 = 3 s
            "restore_interval_s": 0.5,
        }
    )


async def test_a_job_due_after_the_visibility_timeout_runs_once(job_settings: Settings) -> None:
    url = job_settings.require_redis_url()
    client = redis.Redis.from_url(url)
    key = f"{job_settings.key_prefix}:held-job-runs:{uuid.uuid4().hex}"
    queue = queue_name(POOL)
    try:
        with WorkerGroup(job_settings, extra_env={COUNTER_ENV: url}) as group:
            group.start([POOL], 1, "held1")
            sender = Celery("held", set_as_current=False, broker=job_settings.require_broker_url())
            signer = JobSigner.of(job_settings.fleet_key)
            args, kwargs = job_message(counted_job.task_name, {"key": key}, signer)
            try:  # what tool_context.schedule_job(counted_job, delay_s=DELAY_S) sends
                sender.send_task(
                    counted_job.task_name, args, kwargs, queue=queue, countdown=DELAY_S
                )
            finally:
                sender.close()
            await until(lambda: client.get(key) is not None, "the job's run", DELAY_S + 30)
        # The worker stopped: a copy the sweep made would have run by now, or be back on
        # the queue or still in the unacknowledged index.
        runs = int(client.get(key) or 0)
        held = [v for v in client.hvals(UNACKED_KEY) if queue.encode() in v]
        assert (runs, client.llen(queue), held) == (1, 0, [])
    finally:
        client.delete(key, queue)
        client.close()
