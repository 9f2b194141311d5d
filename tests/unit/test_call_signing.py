"""Call envelopes signed with the fleet key: a worker with the key runs only a call the
orchestrator signed, as it was signed, delivered as its own tool's task; without a key
calls go and run unsigned, as before."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import replace
from typing import Any

import fakeredis
import pytest
from celery import Celery, Task

from tests.support import LocalTool
from tests.unit.test_delivery_guard import KEYS, guarded_deps
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.queues import dispatched_at
from toolfleet.shared.call_signing import (
    BAD_SIGNATURE,
    MAX_CALL_AGE_S,
    UNSIGNED,
    CallSigner,
    RefusedCall,
    call_fields,
    call_kwargs,
    read_call,
)
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key, task_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.signing import ResultSigner, new_fleet_key
from toolfleet.shared.tools import ToolOptions
from toolfleet.workers.deliveries import DeliveryGuard, claim_lease_s, uses_claims
from toolfleet.workers.intake.runner import MessageRunner
from toolfleet.workers.tasks import register_tool_tasks
from toolfleet.workers.tool_runs import ToolTaskDeps
from toolfleet.workers.unregistered import answer_unregistered

KEY = new_fleet_key()
SIGNER = CallSigner(KEY)
STREAM = "t:results:s"
SETTINGS = Settings(redis_url="redis://unused", key_prefix="t", max_deliveries=3)
YES = {"confirmed": True, "hint": "", "payload": None}


def envelope(
    tool: str = "transfer", call_id: str = "c1", confirmation: dict[str, Any] | None = None
) -> ToolCall:
    return ToolCall(
        call_id=call_id, tool=tool, args={"amount": 5000}, session_id="s", app_name="app",
        user_id="u", invocation_id="inv", agent="a", reply_to=STREAM, dispatched_at=time.time(),
        confirmation=confirmation,
    )  # fmt: skip


def signed(call: ToolCall, key: str = KEY) -> dict[str, str]:
    """The task kwargs the orchestrator of fleet key `key` sends for `call`."""
    return call_kwargs(call.model_dump_json().encode(), CallSigner(key))


def refusal(task: str, kwargs: dict[str, Any], signer: CallSigner | None = SIGNER) -> str:
    with pytest.raises(RefusedCall) as refused:
        read_call(task, kwargs.get("call"), kwargs.get("sig"), signer)
    return str(refused.value)


# ---------------------------------------------------------------- reading a call


def test_a_signed_call_reads_back_as_the_envelope_sent() -> None:
    call = envelope(confirmation=YES)
    kwargs = signed(call)
    assert set(kwargs) == {"call", "sig"} and len(kwargs["sig"]) == 64
    assert read_call("tool.transfer", kwargs["call"], kwargs["sig"], SIGNER) == call


@pytest.mark.parametrize(
    "field, value",
    [
        ("confirmation", YES),
        ("args", {"amount": 9_999_999}),
        ("reply_to", "t:results:elsewhere"),
        ("session_id", "other"),
        ("call_id", "c2"),
        ("state", {"user:role": "admin"}),
    ],
)
def test_a_call_changed_after_it_was_signed_is_refused(field: str, value: object) -> None:
    kwargs = signed(envelope())
    sent = json.loads(kwargs["call"])
    forged = {**kwargs, "call": json.dumps({**sent, field: value})}
    assert refusal("tool.transfer", forged) == BAD_SIGNATURE


def test_a_byte_changed_in_the_text_is_refused_though_it_parses_the_same() -> None:
    kwargs = signed(envelope())
    assert refusal("tool.transfer", {**kwargs, "call": kwargs["call"] + " "}) == BAD_SIGNATURE


def test_a_call_signed_with_another_fleet_key_is_refused() -> None:
    message = refusal("tool.transfer", signed(envelope(), new_fleet_key()))
    assert message == BAD_SIGNATURE and "TOOLFLEET_FLEET_KEY" in message


def test_the_results_signature_of_the_same_bytes_is_not_a_calls() -> None:
    """The call key is derived apart from the key that signs results."""
    text = envelope().model_dump_json()
    forged = {"call": text, "sig": ResultSigner(KEY).sign(text.encode())}
    assert refusal("tool.transfer", forged) == BAD_SIGNATURE


@pytest.mark.parametrize(
    "kwargs",
    [
        {"call": envelope(confirmation=YES).model_dump_json()},
        {"call": envelope(confirmation=YES).model_dump(mode="json")},  # an older sender's
        {"call": envelope().model_dump(mode="json"), "sig": "00" * 32},
    ],
    ids=["text", "mapping", "mapping with a sig"],
)
def test_a_call_without_a_signature_is_refused_naming_the_key_and_the_version(
    kwargs: dict[str, Any],
) -> None:
    message = refusal("tool.transfer", kwargs)
    assert message == UNSIGNED
    assert "no TOOLFLEET_FLEET_KEY" in message and "upgrade workers and orchestrators" in message


@pytest.mark.parametrize("sig", [12, None, ["ab"], "zz", "\u00e9" * 64])
def test_a_signature_of_another_shape_is_refused(sig: object) -> None:
    kwargs: dict[str, Any] = {**signed(envelope()), "sig": sig}
    assert refusal("tool.transfer", kwargs) in (UNSIGNED, BAD_SIGNATURE)


def test_text_that_is_not_utf_8_is_refused_not_raised() -> None:
    forged = {"call": '{"call_id": "\ud800"}', "sig": "00" * 32}
    assert refusal("tool.transfer", forged) == BAD_SIGNATURE


def test_a_signed_call_delivered_as_another_tools_task_is_refused() -> None:
    kwargs = signed(envelope("read_balance"))
    message = refusal("tool.transfer", kwargs)
    assert message == "it came as task tool.transfer but its envelope names tool 'read_balance'"


def test_a_signed_call_older_than_answered_calls_are_remembered_is_refused() -> None:
    old = envelope().model_copy(update={"dispatched_at": time.time() - MAX_CALL_AGE_S - 60})
    assert "a replayed message" in refusal("tool.transfer", signed(old))


def test_an_unsigned_call_older_than_answered_calls_are_remembered_is_refused() -> None:
    """Without a fleet key too: a message that waited in its queue longer than the
    marker of its answered call lives (its pool's workers down for a week) would run a
    call the model was told about long ago."""
    old = envelope().model_copy(update={"dispatched_at": time.time() - MAX_CALL_AGE_S - 60})
    assert "held longer" in refusal("tool.transfer", {"call": old.model_dump_json()}, None)


def test_without_a_fleet_key_calls_run_unsigned_text_or_mapping_but_as_their_own_task() -> None:
    call = envelope(confirmation=YES)
    for sent in (call.model_dump_json(), call.model_dump(mode="json")):
        assert read_call("tool.transfer", sent, None, None) == call
    # A signature is not looked at: this worker has no key to check it with.
    assert read_call("tool.transfer", call.model_dump_json(), "junk", None) == call
    assert "names tool 'transfer'" in refusal("tool.other", {"call": call.model_dump_json()}, None)


def test_the_signer_is_none_without_a_fleet_key_and_one_per_key() -> None:
    assert CallSigner.of(None) is None and CallSigner.of("") is None
    assert CallSigner.of(KEY) is CallSigner.of(KEY)


def test_a_gauge_reads_the_fields_of_text_or_a_mapping_and_nothing_else() -> None:
    call = envelope()
    assert call_fields(call.model_dump_json())["call_id"] == "c1"
    assert call_fields(call.model_dump(mode="json"))["call_id"] == "c1"
    assert call_fields("[1, 2]") == call_fields("{not json") == call_fields(7) == {}
    publisher = CeleryPublisher(None, signer=SIGNER)  # type: ignore[arg-type]
    raw = publisher.encode(publisher.dispatch(call, "tools.default"))
    assert dispatched_at(raw) == call.dispatched_at


# ---------------------------------------------------------------- on a worker


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def keyed_deps(client: fakeredis.FakeRedis) -> ToolTaskDeps:
    """A worker's task dependencies with the fleet key: calls checked, results signed."""
    deps = guarded_deps(client, SETTINGS)
    return replace(deps, reporter=ResultReporter(client, 1000, ResultSigner(KEY)), signer=SIGNER)


def posted(client: fakeredis.FakeRedis) -> list[ToolResult]:
    return [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
        for _, fields in client.xrange(STREAM)
    ]


def forgeries() -> dict[str, dict[str, Any]]:
    """Messages of `tool.transfer` a client of the broker could write, claiming a yes."""
    claimed = envelope(call_id="forged", confirmation=YES)
    genuine = signed(envelope(call_id="forged"))
    return {
        "unsigned": {"call": claimed.model_dump_json()},
        "an older sender's": {"call": claimed.model_dump(mode="json")},
        "another key's": signed(claimed, new_fleet_key()),
        "tampered": {**genuine, "call": claimed.model_dump_json()},
        "another tool's": signed(envelope("read_balance", "forged", YES)),
        # Text no signature is: comparing it as one would raise, not refuse.
        "a non-ASCII signature": {**genuine, "sig": "\u00e9" * 64},
    }


def transfer_task(client: fakeredis.FakeRedis) -> tuple[Task[Any, Any], list[int]]:
    """The `transfer` tool's task on a keyed worker whose Redis is `client`, and the
    amounts of the runs it made."""
    runs: list[int] = []

    def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        return {"moved": amount}

    app = Celery("signing-test", set_as_current=False)
    register_tool_tasks(app, {"transfer": LocalTool(transfer)}, keyed_deps(client))
    return app.tasks[task_name("transfer")], runs


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_celery_task_refuses_forged_calls_without_running_or_answering_and_runs_a_signed_one(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    task, runs = transfer_task(client)

    for kwargs in forgeries().values():
        task.apply(kwargs=kwargs)
    assert runs == [] and posted(client) == []
    assert caplog.text.count("refused a message of task tool.transfer") == len(forgeries())
    assert UNSIGNED in caplog.text and BAD_SIGNATURE in caplog.text
    assert "the tool did not run" in caplog.text

    task.apply(kwargs=signed(envelope(call_id="real")))
    assert runs == [5000] and [r.call_id for r in posted(client)] == ["real"]


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_replayed_signed_call_that_was_answered_does_not_run_again(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    task, runs = transfer_task(client)
    captured = signed(envelope(call_id="once"))

    for _ in range(3):  # the message, then two replays of it
        task.apply(kwargs=captured)

    assert runs == [5000] and len(posted(client)) == 1
    assert client.exists(KEYS.closed(session_key("app", "u", "s"), "once"))
    assert caplog.text.count("call once (transfer) was answered before it started") == 2


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_an_io_workers_intake_refuses_forged_messages_acks_them_and_runs_a_signed_one(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    async def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        return {"moved": amount}

    app = Celery("intake-signing-test", set_as_current=False)
    register_tool_tasks(app, {"transfer": LocalTool(transfer)}, keyed_deps(client))
    acked: list[str] = []
    all_acked = threading.Event()

    def ack(tag: str) -> None:
        acked.append(tag)
        if len(acked) == len(kwargs):
            all_acked.set()

    runner = MessageRunner(app, "io@host", ack, lambda step: step(), None)
    kwargs = [*forgeries().values(), signed(envelope(call_id="real"))]
    batch = [decode(message("tool.transfer", f"tag-{n}", k)) for n, k in enumerate(kwargs)]

    runner.run([(m, lambda: None) for m in batch])

    assert all_acked.wait(10), f"acknowledged {acked}"
    assert sorted(acked) == sorted(f"tag-{n}" for n in range(len(kwargs)))  # forgeries too
    assert runs == [5000] and [r.call_id for r in posted(client)] == ["real"]
    assert caplog.text.count("refused a message of task tool.transfer") == len(forgeries())


def test_a_forged_call_of_an_unregistered_tool_is_neither_answered_nor_closed(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    reporter = ResultReporter(client, 1000, ResultSigner(KEY))
    session = session_key("app", "u", "s")
    for name, kwargs in forgeries().items():
        sent = (kwargs.get("call"), kwargs.get("sig"))
        answer_unregistered(reporter, KEYS, SIGNER, "tool.transfer", sent, "tools.x", "w@h")
        assert posted(client) == [] and not client.exists(KEYS.closed(session, "forged")), name
    refused = caplog.text.count("refused a message of unregistered task tool.transfer")
    assert refused == len(forgeries())

    genuine = signed(envelope(call_id="real"))
    sent = (genuine["call"], genuine["sig"])
    answer_unregistered(reporter, KEYS, SIGNER, "tool.transfer", sent, "tools.x", "w@h")
    (answer,) = posted(client)
    assert answer.call_id == "real" and answer.response["error_type"] == "ToolNotRegisteredError"


def message(task: str, tag: str, kwargs: dict[str, Any]) -> str:
    """A Celery protocol 2 message of `task` as kombu's Redis transport stores it."""
    body = json.dumps([[], kwargs, {}]).encode()
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-type": "application/json",
            "headers": {"task": task, "id": f"task-{tag}"},
            "properties": {"body_encoding": "base64", "delivery_tag": tag},
        }
    )


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
@pytest.mark.parametrize("retries", [1, 3, -1])
def test_a_copy_of_a_signed_call_with_its_retries_header_changed_runs_nothing(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture, retries: int
) -> None:
    """The header is not signed: a copy with it changed, sent while the call runs, would
    be counted as an attempt of its own and run the tool a second time."""
    task, runs = transfer_task(client)
    captured = signed(envelope(call_id="inflight"))

    task.apply(kwargs=captured, retries=retries)

    assert runs == [] and posted(client) == []
    assert "its retries header says" in caplog.text and "the tool did not run" in caplog.text
    task.apply(kwargs=captured)  # the message itself still runs
    assert runs == [5000]


class Flaky(Exception):
    """What the flaky tool's retry_on names."""


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_retry_a_worker_sends_runs_with_the_fleet_key(client: fakeredis.FakeRedis) -> None:
    runs: list[int] = []

    def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        if len(runs) == 1:
            raise Flaky("try again")
        return {"moved": amount}

    app = Celery("signing-test", set_as_current=False)
    tool = LocalTool(transfer, options=ToolOptions(retry_on=(Flaky,), max_retries=1))
    register_tool_tasks(app, {"transfer": tool}, keyed_deps(client))

    app.tasks[task_name("transfer")].apply(kwargs=signed(envelope(call_id="flaky")))

    assert runs == [5000, 5000]
    assert [(r.status, r.attempt) for r in posted(client)] == [(CallStatus.SUCCESS, 2)]


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_copy_of_a_running_signed_call_does_not_run_beside_it(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """On Redis too: a client of the broker that writes a running call's message again
    (its headers as they were) gets no second run, as a redelivery within
    max_deliveries would."""
    settings = Settings(redis_url="redis://unused", key_prefix="t", fleet_key=KEY)
    guard = DeliveryGuard(client, KEYS, settings.max_deliveries, claims=uses_claims(settings),
                          lease_s=claim_lease_s(settings))  # fmt: skip
    started, release, runs = threading.Event(), threading.Event(), []

    def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        started.set()
        release.wait(10)
        return {"moved": amount}

    app = Celery("signing-test", set_as_current=False)
    deps = replace(keyed_deps(client), deliveries=guard)
    register_tool_tasks(app, {"transfer": LocalTool(transfer)}, deps)
    task = app.tasks[task_name("transfer")]
    captured = signed(envelope(call_id="running"))
    first = threading.Thread(target=task.apply, kwargs={"kwargs": captured})
    first.start()
    try:
        assert started.wait(10)
        task.apply(kwargs=captured)
        task.apply(kwargs=captured)
    finally:
        release.set()
        first.join(10)

    assert runs == [5000] and [r.call_id for r in posted(client)] == ["running"]
    assert caplog.text.count("call running (transfer) was answered before it started") == 2
