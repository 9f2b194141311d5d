"""A long-running call's ticket has one writer: the worker that runs the call opens it
before the tool runs, and the post of the call's first result writes the tool's initial
response into it (or takes it back) in the same step."""

from __future__ import annotations

import fakeredis
import pytest
from celery import Celery

from tests.support import LocalTool, tool_call
from tests.unit.test_delivery_guard import _envelope, guarded_deps
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, task_name
from toolfleet.shared.messages import CallStatus, PendingCall, ToolResult, answered_result
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.reporting import ResultReporter
from toolfleet.workers.tasks import register_tool_tasks

KEYS = Keys("t")
STREAM = "t:results:s"


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def pending_result(call_id: str) -> ToolResult:
    call = tool_call(call_id, "open_case", "s", STREAM)
    return answered_result(call, CallStatus.PENDING, {"ticket": "T-1"}, worker="w")


def started(client: fakeredis.FakeRedis, call_id: str) -> tuple[Completions, PendingCall]:
    completions = Completions(client, KEYS)
    call = PendingCall.starting(tool_call(call_id, "open_case", "s", STREAM))
    assert completions.register(call)  # the worker opens it before the tool runs
    return completions, call


def test_the_post_of_a_pending_result_keeps_the_initial_response_in_the_ticket(
    client: fakeredis.FakeRedis,
) -> None:
    completions, call = started(client, "c1")
    assert completions.get("c1").ticket == {}
    result = pending_result("c1")
    ticket = call.model_copy(update={"ticket": result.response})
    write = completions.ticket_write(ticket, opened=True)
    ResultReporter(client, 100).post(STREAM, result, ticket=write)

    assert completions.get("c1").ticket == {"ticket": "T-1"}
    assert client.xlen(STREAM) == 1  # the result, in the same step
    assert client.smembers(KEYS.session_pending(call.session_key)) == {b"c1"}


def test_a_call_closed_before_its_post_gets_no_ticket_back(client: fakeredis.FakeRedis) -> None:
    completions, call = started(client, "c2")
    batch = WriteBatch()  # the orchestrator timed the call out: closed, ticket gone
    PendingCalls(KEYS).stage_close(batch, call.session_key, ["c2"])
    batch.run_sync(client)
    result = pending_result("c2")
    ticket = call.model_copy(update={"ticket": result.response})
    ResultReporter(client, 100).post(
        STREAM, result, ticket=completions.ticket_write(ticket, opened=True)
    )

    assert client.hexists(KEYS.pending(), "c2") == 0
    assert client.xlen(STREAM) == 1  # the late result is posted (and refused as closed)


def test_the_post_of_a_failed_call_takes_its_ticket_back(client: fakeredis.FakeRedis) -> None:
    completions, call = started(client, "c3")
    failed = answered_result(
        tool_call("c3", "open_case", "s", STREAM), CallStatus.ERROR, {"error": "x"}, worker="w"
    )
    ResultReporter(client, 100).post(
        STREAM, failed, ticket=completions.ticket_write(call, opened=False)
    )

    assert client.hexists(KEYS.pending(), "c3") == 0
    assert client.scard(KEYS.session_pending(call.session_key)) == 0
    assert client.xlen(STREAM) == 1


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
@pytest.mark.parametrize("answers", ["pending", "raises"])
def test_a_worker_opens_the_ticket_and_its_post_writes_or_takes_it_back(
    client: fakeredis.FakeRedis, answers: str
) -> None:
    """Given a long-running tool run by a worker's task: the ticket is there while the tool
    runs (a job it starts may post at once), then holds the tool's initial response - or is
    gone when the tool failed."""
    completions = Completions(client, KEYS)
    seen_while_running: list[bool] = []

    def open_case() -> dict[str, str]:
        """Opens a case."""
        seen_while_running.append(client.hexists(KEYS.pending(), "c1") == 1)
        if answers == "raises":
            raise RuntimeError("the case system is down")
        return {"status": "pending", "case": "K-7"}

    name = f"open_case_{answers}"  # task names are process-wide
    deps = guarded_deps(client, Settings(redis_url="redis://unused", key_prefix="t"), completions)
    app = Celery("ticket-owner", set_as_current=False)
    register_tool_tasks(app, {name: LocalTool(open_case, name, is_long_running=True)}, deps)

    app.tasks[task_name(name)].apply(args=[_envelope(name)])

    assert seen_while_running == [True]
    assert client.xlen("t:results:s") == 1
    if answers == "pending":
        assert completions.get("c1").ticket == {"status": "pending", "case": "K-7"}
    else:
        assert completions.pending() == []
