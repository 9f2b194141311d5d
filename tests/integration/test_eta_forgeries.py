"""With the fleet key, a worker keeps a message for its ETA only when it would run it: a
forged call or job due in a year, written to a queue by a client of the broker, is
refused at once by the prefork workers (Celery's consumer would keep it in memory until
then, and take another in its place), and the fleet still runs what it is sent. Real
Redis and `celery worker` processes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery

from examples import support_tickets
from tests.support import until
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import queue_name, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
JOB = support_tickets.resolve_ticket
FORGED = 20  # of each kind: more than the workers' slots, were they kept


def refused(fleet: WorkerGroup, task: str, task_id: str) -> bool:
    """Whether a worker refused the message `task_id` of `task`."""
    kind = "job" if task.startswith("job.") else "task"
    line = f"refused a message of {kind} {task} (id {task_id})"
    return any(line in worker.log() for worker in fleet.workers)


async def test_forged_messages_due_in_a_year_are_refused_at_once(
    settings: Settings, fleet: WorkerGroup, orchestrator: Orchestrator
) -> None:
    next_year = datetime.now(UTC) + timedelta(days=365)
    forger = Celery("forger", set_as_current=False, broker=settings.require_broker_url())
    sent: list[tuple[str, str]] = []
    try:
        for n in range(FORGED):
            for task, pool, kwargs in (
                (JOB.task_name, JOB.pool, {"call_id": f"c{n}", "ticket_id": "T", "issue": "x"}),
                ("tool.greet_user", "default", {"call": {"call_id": f"c{n}", "args": {}}}),
            ):
                task_id = uuid.uuid4().hex
                forger.send_task(
                    task, [], kwargs, queue=queue_name(pool), task_id=task_id, eta=next_year
                )
                sent.append((task, task_id))
    finally:
        forger.close()

    await until(
        lambda: all(refused(fleet, task, task_id) for task, task_id in sent),
        "the workers to refuse every forged message now, not in a year",
        WAIT_S,
    )
    logs = "".join(worker.log() for worker in fleet.workers)
    assert logs.count("but would not run: run now, to be refused, not kept") == len(sent)

    # The fleet still runs what it is sent: a ticket's tool, and the job it schedules on
    # the pool the forged jobs went to.
    runner = orchestrator.runner("support_agent")
    session_id = uuid.uuid4().hex
    await runner.ask(user_id="u1", session_id=session_id, message="My login keeps failing")
    key = session_key("support_agent", "u1", session_id)
    assert await orchestrator.wait_until_settled(key, WAIT_S)
    session = await runner.store.get(key)
    (completion,) = [e for e in session.events if e.author == "completion"]
    assert completion.calls[0].worker == "job"
