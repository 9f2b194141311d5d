"""With the fleet key, a worker runs a job only from a message a worker of the fleet
signed: a job message written to a queue by any other client of the broker (here: one
that would complete someone's pending ticket with a result of its choosing) is refused
unrun, while the job a tool schedules still runs. Real Redis and `celery worker`
processes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import redis
from celery import Celery

from examples import support_tickets
from tests.support import until
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.config import Settings
from toolfleet.shared.job_signing import JobSigner, job_message
from toolfleet.shared.keys import Keys, SessionKey, queue_name, session_key
from toolfleet.shared.signing import new_fleet_key

pytestmark = pytest.mark.integration

WAIT_S = 30
JOB = support_tickets.resolve_ticket


async def ask(orch: Orchestrator, app: str, message: str) -> SessionKey:
    """Run a message on a new session of user u1; its key."""
    session_id = uuid.uuid4().hex
    async for _ in orch.runner(app).run(user_id="u1", session_id=session_id, message=message):
        pass
    return session_key(app, "u1", session_id)


def forgeries(key: str, kwargs: dict[str, Any]) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The positional and keyword arguments of `resolve_ticket` messages that a client of
    the broker could write, by what it knows: not the fleet's job key."""
    (genuine_text, genuine_sig), _ = job_message(
        JOB.task_name, {**kwargs, "call_id": "its-own"}, JobSigner(key)
    )
    text = json.dumps(kwargs)
    return {
        "unsigned": ([], kwargs),
        "another key's": job_message(JOB.task_name, kwargs, JobSigner(new_fleet_key())),
        "changed after signing": ([text, genuine_sig], {}),
        "signed as another job": job_message("job.confirm_booking", kwargs, JobSigner(key)),
        "signed with the call key": (
            [text, CallSigner(key).sign(f"{JOB.task_name}\n{text}".encode())],
            {},
        ),
        "keywords beside a signed job": ([genuine_text, genuine_sig], kwargs),
    }


def refusal(fleet: WorkerGroup, task_id: str) -> str | None:
    """The line in which a worker refused the job message `task_id`, if one did."""
    for worker in fleet.workers:
        for line in worker.log().splitlines():
            if f"refused a message of job {JOB.task_name} (id {task_id})" in line:
                return line
    return None


async def test_a_forged_job_message_is_refused_unrun_and_a_tools_job_still_runs(
    settings: Settings, fleet: WorkerGroup, orchestrator: Orchestrator
) -> None:
    # Someone's ticket: a reimbursement waiting for its approver.
    runner = orchestrator.runner("reimbursement_agent")
    key = await ask(orchestrator, "reimbursement_agent", "Please reimburse 200$ for meals")
    (pending,) = await runner.store.pending_calls(key)

    # A client of the broker starts the job that would resolve it, with its own result.
    chosen = {"call_id": pending.call_id, "ticket_id": "TCK-FORGED", "issue": "approve it"}
    assert settings.fleet_key is not None
    sent: dict[str, str] = {}
    forger = Celery("forger", set_as_current=False, broker=settings.require_broker_url())
    try:
        for name, (args, kwargs) in forgeries(settings.fleet_key, chosen).items():
            sent[name] = uuid.uuid4().hex
            forger.send_task(
                JOB.task_name, args, kwargs, queue=queue_name(JOB.pool), task_id=sent[name]
            )
    finally:
        forger.close()

    await until(
        lambda: all(refusal(fleet, task_id) for task_id in sent.values()),
        "the tickets worker to refuse each forged job message",
        WAIT_S,
    )
    for name, task_id in sent.items():
        line = refusal(fleet, task_id) or ""
        assert "the job did not run" in line, (name, line)
        if name == "unsigned":
            assert "no TOOLFLEET_FLEET_KEY" in line, line
        elif name == "keywords beside a signed job":
            assert "keyword arguments besides the signed ones" in line, line
        else:
            assert "its signature is wrong" in line, (name, line)

    # The job a tool schedules (signed by the worker that ran it) still runs.
    support = orchestrator.runner("support_agent")
    ticket_key = await ask(orchestrator, "support_agent", "My login keeps failing")
    assert await orchestrator.wait_until_settled(ticket_key, WAIT_S)
    session = await support.store.get(ticket_key)
    (completion,) = [e for e in session.events if e.author == "completion"]
    assert completion.calls[0].worker == "job"

    # Nothing was posted for the approval: it still waits for its approver.
    (still,) = await runner.store.pending_calls(key)
    assert still.call_id == pending.call_id and still.ticket["status"] == "pending"
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        stream = Keys(settings.key_prefix).completions("reimbursement_agent")
        assert pending.call_id not in str(client.xrange(stream))
    finally:
        client.close()
    # Each refused once (the fleet is shared: other tests' refusals are in its logs too).
    logs = "".join(worker.log() for worker in fleet.workers)
    for name, task_id in sent.items():
        assert logs.count(f"refused a message of job {JOB.task_name} (id {task_id})") == 1, name
