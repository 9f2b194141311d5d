"""An io worker holds a message for its ETA in one of its slots only when it would run
it: a client of the broker without the fleet key that sends messages due in a year is
refused at once, and cannot hold every slot until then."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
from celery import Celery
from celery.signals import task_received
from celery.worker.request import Request
from kombu.message import Message

from tests.support import LocalTool
from tests.unit.test_call_signing import (
    KEY,
    KEYS,
    envelope,
    forgeries,
    keyed_deps,
    posted,
    signed,
    transfer_task,
)
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.completions import Completions
from toolfleet.shared.job_signing import JobSigner, job_message
from toolfleet.shared.jobs import Job
from toolfleet.shared.keys import Keys, session_key
from toolfleet.workers.eta_guard import due_as_a_retry, install_eta_guard
from toolfleet.workers.intake.intake import Intake
from toolfleet.workers.intake.source import Taken
from toolfleet.workers.tasks import register_job_tasks, register_tool_tasks

NEXT_YEAR = (datetime.now(UTC) + timedelta(days=365)).isoformat()


def message(task: str, tag: str, args: list[Any], kwargs: dict[str, Any], eta: str | None) -> str:
    """A Celery protocol 2 message as kombu's Redis transport stores it, due at `eta`."""
    body = json.dumps([args, kwargs, {}]).encode()
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-type": "application/json",
            "headers": {"task": task, "id": f"task-{tag}", "eta": eta},
            "properties": {"body_encoding": "base64", "delivery_tag": tag},
        }
    )


class ListSource:
    """A queue of raw messages, taken in order; what is acknowledged is recorded."""

    def __init__(self, raw: Sequence[str], expected_acks: int) -> None:
        self._raw = list(raw)
        self._lock = threading.Lock()
        self.acked: list[str] = []
        self.all_acked = threading.Event()
        self._expected = expected_acks
        self.name = "list"

    @property
    def takers(self) -> list[ListSource]:
        return [self]

    def take(self, limit: int) -> Taken:
        with self._lock:
            batch, self._raw = self._raw[:limit], self._raw[limit:]
        return Taken(messages=[decode(raw) for raw in batch])

    def wait(self, timeout_s: float) -> None:
        self.all_acked.wait(min(timeout_s, 0.05))

    def ack(self, tag: str) -> None:
        self.acked.append(tag)
        if len(self.acked) >= self._expected:
            self.all_acked.set()

    def start(self) -> None: ...
    def requeue(self, tag: str) -> None: ...
    def keep(self, tags: Sequence[str]) -> None: ...
    def holds(self, tag: str) -> bool:
        return True

    def stop_taking(self) -> None: ...
    def stop(self) -> None: ...


def rotate(call_id: str) -> None:
    """A job."""


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_forged_messages_due_in_a_year_are_refused_at_once_and_a_call_behind_them_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = fakeredis.FakeRedis()
    runs: list[int] = []

    def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        return {"moved": amount}

    app = Celery("intake-eta-test", set_as_current=False)
    register_tool_tasks(app, {"transfer": LocalTool(transfer)}, keyed_deps(client))
    job = Job(rotate, "tickets", "rotate")
    register_job_tasks(app, {job.name: job}, Completions(client, Keys("t")), JobSigner(KEY))
    forged = [message("tool.transfer", f"f{n}", [], k, NEXT_YEAR)
              for n, k in enumerate(forgeries().values())]  # fmt: skip
    forged.append(message("tool.nothing", "unknown", [], {}, NEXT_YEAR))
    forged.append(message("job.rotate", "job", [], {"call_id": "c1"}, NEXT_YEAR))
    args, kwargs = job_message("job.rotate", {"call_id": "c1"}, JobSigner(KEY))
    held = message("job.rotate", "signed-job", args, kwargs, NEXT_YEAR)  # a real countdown
    real = message("tool.transfer", "real", [], signed(envelope(call_id="real")), None)
    source = ListSource([*forged, held, real], len(forged) + 1)
    # Two slots: the signed job holds one; held, the forgeries would take the other.
    intake = Intake(app, source, "io@host", 2, threads=2, task_events=lambda: False)

    intake.start()
    try:
        assert source.all_acked.wait(10), f"acknowledged {source.acked}"
    finally:
        intake.stop(wait=False)

    assert "signed-job" not in source.acked and "real" in source.acked
    assert len(source.acked) == len(forged) + 1
    assert runs == [5000] and [r.call_id for r in posted(client)] == ["real"]
    assert caplog.text.count("refused a message of task tool.transfer") == len(forged) - 2
    assert "refused a message of job job.rotate" in caplog.text


class Unreadable:
    """A tool's runs that cannot read a message at all (raise, not refuse)."""

    def readable(self, call: Any, signature: Any) -> bool:
        raise RuntimeError("cannot read it")


def test_a_prefork_worker_keeps_no_message_its_task_cannot_read_until_its_eta(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Celery's consumer asks the guard before it keeps a message for its ETA; a message
    whose reading raises is run now (to be refused), not kept for a year - Celery's
    signal would log the error and keep it."""
    app = Celery("prefork-eta-test", set_as_current=False)
    install_eta_guard(app)
    task = SimpleNamespace(toolfleet_runs=Unreadable())
    request = SimpleNamespace(
        eta=NEXT_YEAR, _eta=NEXT_YEAR, task=task, kwargs={}, args=(), name="tool.t", id="f1"
    )
    consumer = type("Consumer", (), {"app": app})()  # what Celery sends it as (hashable)
    task_received.send(sender=consumer, request=request)
    assert request._eta is None
    assert "tool.t[f1]: could not read its message" in caplog.text


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_copies_of_a_signed_call_due_later_than_a_retry_would_be_hold_no_slot() -> None:
    """A message's ETA and retries are not signed: a client of the broker without the
    fleet key copies a signed call (an answered one; one with its retries header raised)
    and sets each copy's ETA a year out. A call is due later only as a worker's retry,
    its countdown away: the copies run at once, to be refused (answered already; no
    worker retried it), and the call behind them runs."""
    client = fakeredis.FakeRedis()
    task, runs = transfer_task(client)
    answered = signed(envelope(call_id="answered"))
    client.set(KEYS.closed(session_key("app", "u", "s"), "answered"), 1)
    copies = [message("tool.transfer", f"copy{n}", [], answered, NEXT_YEAR) for n in range(2)]
    retried = json.loads(message("tool.transfer", "retry", [], signed(envelope()), NEXT_YEAR))
    retried["headers"]["retries"] = 1  # as a worker's retry says
    retried = json.dumps(retried)
    real = message("tool.transfer", "real", [], signed(envelope(call_id="real")), None)
    source = ListSource([*copies, retried, real], 4)
    intake = Intake(task.app, source, "io@host", 2, threads=2, task_events=lambda: False)

    intake.start()
    try:
        assert source.all_acked.wait(10), f"acknowledged {source.acked}"
    finally:
        intake.stop(wait=False)

    assert sorted(source.acked) == ["copy0", "copy1", "real", "retry"]
    assert runs == [5000]  # the real call alone


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_call_is_due_later_only_as_a_retry_its_countdown_away() -> None:
    task, _ = transfer_task(fakeredis.FakeRedis())
    now = datetime.now(UTC)
    soon, later = now + timedelta(seconds=3), now + timedelta(days=365)
    assert due_as_a_retry(task, 0, None)  # due now: nothing to hold
    assert due_as_a_retry(task, 1, soon) and due_as_a_retry(task, 3, soon)
    assert not due_as_a_retry(task, 0, soon)  # a first attempt carries no countdown
    assert not due_as_a_retry(task, 1, later)
    assert not due_as_a_retry(task, 10**9, soon)  # past max_retries (and never 2**1e9)


def celery_request(task: Any, kwargs: dict[str, Any], retries: int, eta: str) -> Request:
    """The Request a prefork worker's consumer makes of a message of `task`."""
    headers = {"task": task.name, "id": f"r{retries}", "retries": retries, "eta": eta}
    body = json.dumps([[], kwargs, {}])
    message = Message(body=body, headers=headers, content_type="application/json",
                      content_encoding="utf-8", delivery_info={})  # fmt: skip
    return Request(message, app=task.app, task=task)


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_prefork_worker_keeps_a_signed_call_only_as_long_as_a_retry_waits() -> None:
    task, _ = transfer_task(fakeredis.FakeRedis())
    install_eta_guard(task.app)
    consumer = type("Consumer", (), {"app": task.app})()
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    kept = []
    for retries, eta in ((0, NEXT_YEAR), (1, NEXT_YEAR), (1, soon)):
        request = celery_request(task, signed(envelope()), retries, eta)
        task_received.send(sender=consumer, request=request)
        kept.append(request.eta is not None)
    assert kept == [False, False, True]  # a copy due in a year runs now, to be refused
