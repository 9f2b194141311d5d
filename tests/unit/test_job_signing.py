"""Job messages signed with the fleet key: a worker with the key runs a job only from a
message a worker of the fleet signed for that job, with the arguments it signed; without
a key jobs go and run unsigned, as before."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import fakeredis
import pytest
from celery import Celery
from kombu.serialization import dumps as kombu_dumps
from kombu.serialization import loads as kombu_loads

from toolfleet.shared.call_signing import BAD_SIGNATURE as CALL_BAD_SIGNATURE
from toolfleet.shared.call_signing import CallSigner, RefusedCall, read_call
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.completions import Completions
from toolfleet.shared.job_signing import (
    BAD_SIGNATURE,
    MALFORMED,
    UNCOVERED,
    UNSIGNED,
    JobSigner,
    RefusedJob,
    job_message,
    read_job,
)
from toolfleet.shared.jobs import Job, JobContext
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import ResultSigner, new_fleet_key
from toolfleet.workers.intake.runner import MessageRunner
from toolfleet.workers.tasks import make_scheduler, register_job_tasks

KEY = new_fleet_key()
SIGNER = JobSigner(KEY)
TASK = "job.resolve_ticket"
KWARGS: dict[str, Any] = {"call_id": "c1", "ticket_id": "TCK-1", "issue": "login fails"}


def signed(
    kwargs: dict[str, Any] = KWARGS, task: str = TASK, key: str = KEY
) -> tuple[list[str], dict[str, Any]]:
    """The positional and keyword arguments a worker of fleet key `key` sends for a job."""
    return job_message(task, kwargs, JobSigner(key))


def refusal(
    args: list[Any], kwargs: dict[str, Any], task: str = TASK, signer: JobSigner | None = SIGNER
) -> str:
    with pytest.raises(RefusedJob) as refused:
        read_job(task, args, kwargs, signer)
    return str(refused.value)


# ---------------------------------------------------------------- reading a job


def test_a_signed_job_travels_as_text_and_signature_and_reads_back_as_sent() -> None:
    args, kwargs = signed()
    assert kwargs == {} and len(args) == 2 and len(args[1]) == 64
    assert json.loads(args[0]) == KWARGS
    assert read_job(TASK, args, kwargs, SIGNER) == KWARGS


def test_a_signed_job_gets_the_values_celery_would_have_given_it() -> None:
    """Celery's JSON keeps dates and decimals; the signed text does too."""
    values = {"at": datetime(2026, 1, 2, 3, 4, tzinfo=UTC), "amount": Decimal("1.10"), "n": [1]}
    content_type, encoding, body = kombu_dumps(values, serializer="json")
    as_celery_sends = kombu_loads(body, content_type, encoding)
    args, kwargs = signed(values)
    assert read_job(TASK, args, kwargs, SIGNER) == as_celery_sends == values


@pytest.mark.parametrize(
    "changes",
    [{"call_id": "someone-elses"}, {"issue": "chosen result"}, {"extra": 1}],
    ids=["call id", "argument", "added argument"],
)
def test_a_job_changed_after_it_was_signed_is_refused(changes: dict[str, Any]) -> None:
    (text, sig), _ = signed()
    forged = json.dumps({**json.loads(text), **changes})
    assert refusal([forged, sig], {}) == BAD_SIGNATURE


def test_a_byte_changed_in_the_text_is_refused_though_it_parses_the_same() -> None:
    (text, sig), _ = signed()
    assert refusal([text + " ", sig], {}) == BAD_SIGNATURE


def test_a_job_signed_with_another_fleet_key_is_refused() -> None:
    args, kwargs = signed(key=new_fleet_key())
    message = refusal(args, kwargs)
    assert message == BAD_SIGNATURE and "TOOLFLEET_FLEET_KEY" in message


def test_a_signed_job_delivered_as_another_job_is_refused() -> None:
    args, kwargs = signed(task="job.confirm_booking")
    assert refusal(args, kwargs) == BAD_SIGNATURE
    assert read_job("job.confirm_booking", args, kwargs, SIGNER) == KWARGS


def test_the_call_and_results_signatures_of_the_same_bytes_are_not_a_jobs() -> None:
    """The job key is derived apart from the call key and the fleet key itself."""
    (text, job_sig), _ = signed()
    data = f"{TASK}\n{text}".encode()
    for other in (CallSigner(KEY).sign(data), ResultSigner(KEY).sign(data)):
        assert other != job_sig
        assert refusal([text, other], {}) == BAD_SIGNATURE


def test_a_jobs_signature_is_not_a_calls() -> None:
    call = ToolCall(
        call_id="c1", tool="transfer", args={"amount": 5}, session_id="s", app_name="app",
        user_id="u", invocation_id="inv", agent="a", reply_to="t:results:s",
        dispatched_at=time.time(),
    )  # fmt: skip
    envelope = call.model_dump_json()
    with pytest.raises(RefusedCall) as refused:
        read_call("tool.transfer", envelope, SIGNER.sign(envelope.encode()), CallSigner(KEY))
    assert str(refused.value) == CALL_BAD_SIGNATURE


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ([], KWARGS),  # as a sender without a fleet key, or an older one, sends it
        ([json.dumps(KWARGS)], {}),
        ([json.dumps(KWARGS), None], {}),
        ([KWARGS, "00" * 32], {}),
    ],
    ids=["keywords", "text alone", "text and None", "a mapping with a sig"],
)
def test_a_job_without_a_signature_is_refused_naming_the_key_and_the_version(
    args: list[Any], kwargs: dict[str, Any]
) -> None:
    message = refusal(args, kwargs)
    assert message == UNSIGNED
    assert "no TOOLFLEET_FLEET_KEY" in message and "upgrade the workers" in message


@pytest.mark.parametrize("sig", [12, ["ab"], "zz", "00" * 32, "\u00e9" * 64])
def test_a_signature_of_another_shape_or_value_is_refused(sig: object) -> None:
    (text, _), _ = signed()
    assert refusal([text, sig], {}) == BAD_SIGNATURE


def test_text_that_is_not_utf_8_is_refused_not_raised() -> None:
    assert refusal(['{"call_id": "\ud800"}', "00" * 32], {}) == BAD_SIGNATURE


def test_keyword_arguments_beside_a_signed_job_are_refused() -> None:
    args, _ = signed()
    assert refusal(args, {"call_id": "someone-elses"}) == UNCOVERED


def test_without_a_fleet_key_jobs_go_and_run_unsigned_as_before() -> None:
    assert job_message(TASK, KWARGS, None) == ([], KWARGS)
    assert read_job(TASK, [], KWARGS, None) == KWARGS
    # A signed job is read too: this worker has no key to check it with.
    args, kwargs = signed()
    assert read_job(TASK, args, kwargs, None) == KWARGS
    assert refusal(["[1, 2]", "sig"], {}, signer=None) == MALFORMED
    assert refusal(["{not json", "sig"], {}, signer=None) == MALFORMED
    assert refusal([1, 2, 3], {}, signer=None) == MALFORMED


def test_the_signer_is_none_without_a_fleet_key_and_one_per_key() -> None:
    assert JobSigner.of(None) is None and JobSigner.of("") is None
    assert JobSigner.of(KEY) is JobSigner.of(KEY)


# ---------------------------------------------------------------- on a worker


class Recorded:
    """A job that records the keyword arguments it runs with."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def resolve_ticket(
        self, call_id: str, ticket_id: str, issue: str, job_context: JobContext
    ) -> None:
        assert isinstance(job_context, JobContext)
        self.runs.append({"call_id": call_id, "ticket_id": ticket_id, "issue": issue})


def job_app(recorded: Recorded, signer: JobSigner | None) -> Celery:
    app = Celery("job-signing-test", set_as_current=False)
    job = Job(recorded.resolve_ticket, "tickets", "resolve_ticket")
    completions = Completions(fakeredis.FakeRedis(), Keys("t"))
    register_job_tasks(app, {job.name: job}, completions, signer)
    return app


def forgeries() -> dict[str, tuple[list[Any], dict[str, Any]]]:
    """Messages of `job.resolve_ticket` a client of the broker could write."""
    chosen = {**KWARGS, "call_id": "someone-elses"}
    (text, sig), _ = signed()
    call_key_sig = CallSigner(KEY).sign(f"{TASK}\n{json.dumps(chosen)}".encode())
    return {
        "unsigned": ([], chosen),
        "another key's": signed(chosen, key=new_fleet_key()),
        "tampered": ([json.dumps(chosen), sig], {}),
        "another job's": signed(chosen, task="job.confirm_booking"),
        "the call key's": ([json.dumps(chosen), call_key_sig], {}),
        "with keywords beside": ([text, sig], {"call_id": "someone-elses"}),
    }


# The task names its queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_job_task_refuses_forged_messages_without_running_and_runs_a_signed_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded = Recorded()
    task = job_app(recorded, SIGNER).tasks[TASK]

    for n, (args, kwargs) in enumerate(forgeries().values()):
        result = task.apply(args=tuple(args), kwargs=kwargs, task_id=f"forged-{n}")
        assert result.successful()  # ended, so acknowledged: never run again
    assert recorded.runs == []
    refused = f"refused a message of job {TASK} (id forged-%d), the job did not run"
    for n in range(len(forgeries())):
        assert refused % n in caplog.text
    assert UNSIGNED in caplog.text and BAD_SIGNATURE in caplog.text and UNCOVERED in caplog.text

    args, kwargs = signed()
    task.apply(args=tuple(args), kwargs=kwargs)
    assert recorded.runs == [KWARGS]


def message(task: str, tag: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """A Celery protocol 2 message of `task` as kombu's Redis transport stores it."""
    body = json.dumps([args, kwargs, {}]).encode()
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-type": "application/json",
            "headers": {"task": task, "id": f"task-{tag}"},
            "properties": {"body_encoding": "base64", "delivery_tag": tag},
        }
    )


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_an_io_workers_intake_refuses_forged_job_messages_acks_them_and_runs_a_signed_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded = Recorded()
    app = job_app(recorded, SIGNER)
    sent = [*forgeries().values(), signed()]
    acked: list[str] = []
    all_acked = threading.Event()

    def ack(tag: str) -> None:
        acked.append(tag)
        if len(acked) == len(sent):
            all_acked.set()

    runner = MessageRunner(app, "io@host", ack, lambda step: step(), None)
    batch = [decode(message(TASK, f"tag-{n}", a, k)) for n, (a, k) in enumerate(sent)]

    runner.run([(m, lambda: None) for m in batch])

    assert all_acked.wait(10), f"acknowledged {acked}"
    assert sorted(acked) == sorted(f"tag-{n}" for n in range(len(sent)))  # forgeries too
    assert recorded.runs == [KWARGS]
    assert caplog.text.count(f"refused a message of job {TASK} (id task-tag-") == len(sent) - 1


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_without_a_fleet_key_a_job_task_runs_unsigned_messages_as_before() -> None:
    recorded = Recorded()
    task = job_app(recorded, None).tasks[TASK]
    task.apply(kwargs=KWARGS)
    task.apply(args=tuple(signed()[0]))
    assert recorded.runs == [KWARGS, KWARGS]


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
@pytest.mark.parametrize("signer", [SIGNER, None], ids=["fleet key", "no key"])
def test_the_scheduler_sends_what_the_job_task_runs_and_flower_shows_its_keywords(
    monkeypatch: pytest.MonkeyPatch, signer: JobSigner | None
) -> None:
    recorded = Recorded()
    app = job_app(recorded, signer)
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append((name, options)))
    job = Job(recorded.resolve_ticket, "tickets", "resolve_ticket")

    make_scheduler(app, signer)(job, 3.0, dict(KWARGS))

    [(name, options)] = sent
    assert name == TASK and options["queue"] == "tools.tickets" and options["countdown"] == 3.0
    assert (options["argsrepr"], options["kwargsrepr"]) == ("()", repr(KWARGS))
    if signer is None:
        assert (options["args"], options["kwargs"]) == ([], KWARGS)  # as before
    else:
        assert read_job(TASK, options["args"], options["kwargs"], SIGNER) == KWARGS
    app.tasks[TASK].apply(args=tuple(options["args"]), kwargs=options["kwargs"])
    assert recorded.runs == [KWARGS]


class Keyed:
    """A job that takes a secret-named argument and records it."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def rotate(self, call_id: str, api_key: Any) -> None:
        self.runs.append({"call_id": call_id, "api_key": api_key})


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
@pytest.mark.parametrize("key", [KEY, None], ids=["fleet key", "no key"])
def test_a_jobs_secret_named_arguments_are_masked_for_flower_and_sealed_on_the_wire(
    monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    keyed = Keyed()
    job = Job(keyed.rotate, "tickets", "rotate")
    signer = JobSigner.of(key)
    sealer = None if key is None else Sealer(key, ["api_key"])
    app = Celery("job-sealing-test", set_as_current=False)
    register_job_tasks(app, {job.name: job}, Completions(fakeredis.FakeRedis(), Keys("t")),
                       signer, sealer, ["api_key"])  # fmt: skip
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append(options))
    given = {"call_id": "c1", "api_key": "sk-live-123"}

    make_scheduler(app, signer, sealer, ["api_key"])(job, 0.0, dict(given))

    [options] = sent
    assert options["kwargsrepr"] == repr({"call_id": "c1", "api_key": "***"})
    if key is not None:  # what a client of the broker reads holds no secret
        assert "sk-live-123" not in json.dumps([options["args"], options["kwargs"]])
    app.tasks["job.rotate"].apply(args=tuple(options["args"]), kwargs=options["kwargs"])
    assert keyed.runs == [given]


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_sealed_shape_a_tool_passes_to_a_job_comes_back_as_that_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only what the scheduler sealed opens: a token the tool copied from elsewhere is not
    opened for the job."""
    keyed = Keyed()
    job = Job(keyed.rotate, "tickets", "rotate")
    sealer = Sealer(KEY, ["api_key"])
    app = Celery("job-sealing-test", set_as_current=False)
    register_job_tasks(app, {job.name: job}, Completions(fakeredis.FakeRedis(), Keys("t")),
                       SIGNER, sealer, ["api_key"])  # fmt: skip
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append(options))
    copied = sealer.seal({"api_key": "someone-elses"})["api_key"]

    make_scheduler(app, SIGNER, sealer, ["api_key"])(job, 0.0, {"call_id": "c1", "api_key": copied})

    app.tasks["job.rotate"].apply(args=tuple(sent[0]["args"]), kwargs=sent[0]["kwargs"])
    assert keyed.runs == [{"call_id": "c1", "api_key": copied}]
