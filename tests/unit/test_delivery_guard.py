"""The crash guard of tool tasks: a call is delivered at most max_deliveries times."""

from __future__ import annotations

import os
import time
from typing import Any

import fakeredis
import pytest
import redis
from celery import Celery

from tests.support import LocalTool, counted_round_trips
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys, session_key, task_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, RunningCall, ToolCall, ToolResult
from toolfleet.shared.reporting import ResultReporter
from toolfleet.workers.deliveries import (
    COUNT_BATCH,
    DELIVERIES_TTL_S,
    RUNNING_TTL_S,
    DeliveryGuard,
)
from toolfleet.workers.tasks import register_tool_tasks
from toolfleet.workers.tool_runs import ToolTaskDeps

KEYS = Keys("t")
S = session_key("app", "u", "s")
SENT_AT = time.time()  # when the calls of these tests were sent (their dispatched_at)


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def test_counts_each_delivery_of_an_attempt_and_refuses_past_the_limit(
    client: fakeredis.FakeRedis,
) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    counts = [guard.count(call("c1"), 0)[0] for _ in range(4)]
    assert counts == [1, 2, 3, 4]
    assert [guard.exhausted(n) for n in counts] == [False, False, False, True]
    ttl = client.ttl(KEYS.deliveries("c1", 0, SENT_AT))
    assert 0 < ttl <= DELIVERIES_TTL_S  # the counter goes by itself


def test_a_retry_and_another_call_have_counters_of_their_own(client: fakeredis.FakeRedis) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=1)
    assert guard.count(call("c1"), 0) == (1, False)
    assert guard.count(call("c1"), 1) == (1, False)  # self.retry sends a new message: no crash
    assert guard.count(call("c2"), 0) == (1, False)
    assert guard.count(call("c1"), 0) == (2, False)


@pytest.mark.parametrize("claims", [False, True])
def test_a_call_sent_again_is_counted_anew_not_as_a_copy(
    client: fakeredis.FakeRedis, claims: bool
) -> None:
    # Given a call delivered to its limit (with claims: a first delivery, claimed)
    guard = DeliveryGuard(client, KEYS, max_deliveries=1, claims=claims)
    assert guard.count(call("c1"), 0) == (1, False)
    # When it is sent again, once confirmed or with the user's credential (a new message)
    again = call("c1").model_copy(update={"dispatched_at": SENT_AT + 30})
    # Then that send's first delivery runs; a copy of it does not
    assert guard.count(again, 0) == (1, False)
    assert guard.count(again, 0) == ((0, True) if claims else (2, False))


def test_with_claims_a_count_sent_again_after_its_reply_was_lost_is_its_own(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a first delivery's count that Redis made, and whose reply was lost: the
    # client sends the same command again (the same claim)
    guard = DeliveryGuard(client, KEYS, max_deliveries=3, claims=True)
    monkeypatch.setattr("toolfleet.workers.deliveries.unique_hex", lambda: "delivery-1")
    assert guard.count(call("c1"), 0) == (1, False)
    # Then the resend gets that delivery's count: it runs, and is not counted twice
    assert guard.count(call("c1"), 0) == (1, False)
    # While another first delivery of the message (published twice) is a copy
    monkeypatch.setattr("toolfleet.workers.deliveries.unique_hex", lambda: "delivery-2")
    assert guard.count(call("c1"), 0) == (0, True)


def test_the_count_also_says_whether_the_orchestrator_closed_the_call(
    client: fakeredis.FakeRedis,
) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    client.set(KEYS.closed(S, "c1"), 1)
    assert guard.count(call("c1"), 0) == (1, True)
    assert guard.count(call("c2"), 0) == (1, False)


def test_a_batch_is_counted_in_one_round_trip_as_one_by_one_counts_would_be(
    client: fakeredis.FakeRedis,
) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    client.set(KEYS.closed(S, "c2"), 1)
    guard.count(call("c1"), 0)
    round_trips = counted_round_trips(client)
    counts = guard.count_all(
        [(call("c1"), 0, "w", False), (call("c2"), 0, "w", False), (call("c1"), 1, "w", False)]
    )
    assert counts == [(2, False), (1, True), (1, False)]
    assert len(round_trips) == 1
    assert set(client.hkeys(KEYS.running(S))) == {b"c1", b"c2"}  # who runs them, as `count`


def test_a_batch_records_who_runs_each_call_and_renews_each_sessions_record(
    client: fakeredis.FakeRedis,
) -> None:
    """Each call's record is a RunningCall; every session of the batch has its record's
    TTL set, though the script renews each one once per run."""
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    other = call("d1").model_copy(update={"session_id": "s2"})
    before = time.time()
    guard.count_all(
        [(call("c1"), 0, "io@h", False), (other, 0, "io@h", False), (call("c2"), 0, "io@h", False)]
    )
    for session, call_id in [(S, "c1"), (S, "c2"), (other.session_key, "d1")]:
        note = RunningCall.model_validate_json(client.hget(KEYS.running(session), call_id) or b"")
        assert (note.worker, note.pid, note.waiting_for) == ("io@h", os.getpid(), None)
        assert before <= note.started_at <= time.time()
        assert 0 < client.ttl(KEYS.running(session)) <= RUNNING_TTL_S


def test_in_a_batch_with_claims_the_first_delivery_runs_and_its_copies_do_not(
    client: fakeredis.FakeRedis,
) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3, claims=True, lease_s=0.3)
    counts = guard.count_all(
        [(call("c1"), 0, "w", False), (call("c1"), 0, "w", False), (call("c1"), 0, "w", True)]
    )
    # The first claims the attempt; a copy of it (published twice) counts as closed, and
    # so does a redelivered copy: the claim's lease is renewed while the first runs.
    assert counts == [(1, False), (0, True), (0, True)]
    assert client.get(KEYS.deliveries("c1", 0, SENT_AT)) == b"1"


def claim_of(call_id: str) -> str:
    return f"{KEYS.deliveries(call_id, 0, SENT_AT)}:claimed"


def test_with_claims_a_redelivered_copy_of_a_running_call_is_not_run(
    client: fakeredis.FakeRedis,
) -> None:
    # Given a first delivery that runs on one worker (its claim renewed)
    running = DeliveryGuard(client, KEYS, max_deliveries=3, claims=True, lease_s=0.3)
    assert running.count(call("c1"), 0) == (1, False)
    # When a copy of its message (published twice) comes to another as a redelivery
    other = DeliveryGuard(client, KEYS, max_deliveries=3, claims=True, lease_s=0.3)
    # Then it is a duplicate, not counted, however long the first runs
    assert other.count(call("c1"), 0, redelivered=True) == (0, True)
    assert client.get(KEYS.deliveries("c1", 0, SENT_AT)) == b"1"
    # And once the first delivery ended, a copy is one at once: its claim is settled
    running.settle([(call("c1"), 0)])
    assert client.pttl(claim_of("c1")) > 300
    assert other.count(call("c1"), 0, redelivered=True) == (0, True)


def test_with_claims_a_redelivery_takes_over_a_claim_whose_worker_died(
    client: fakeredis.FakeRedis,
) -> None:
    # Given a first delivery counted and claimed by a worker that died: its claim is
    # renewed no more
    client.set(KEYS.deliveries("c1", 0, SENT_AT), 1)
    client.set(claim_of("c1"), "dead-worker", px=200)
    guard = DeliveryGuard(client, KEYS, max_deliveries=3, claims=True, lease_s=0.3)
    # When its message is redelivered: it runs once the lease lapsed, counted
    assert guard.count(call("c1"), 0, redelivered=True) == (2, False)
    assert client.get(claim_of("c1")) not in (None, b"dead-worker")  # its own claim now
    # And a redelivery after that worker died too is counted: max_deliveries stops it
    client.set(claim_of("c1"), "dead-again", px=200)
    counts = guard.count_all([(call("c1"), 0, "w", True)])
    assert counts == [(3, False)]


def test_a_delivery_whose_count_failed_gets_its_error_and_the_others_their_counts(
    client: fakeredis.FakeRedis,
) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    client.set(KEYS.deliveries("c2", 0, SENT_AT), "not a number")
    counts = guard.count_all(
        [(call("c1"), 0, "w", False), (call("c2"), 0, "w", False), (call("c3"), 0, "w", False)]
    )
    assert counts[0] == (1, False) and counts[2] == (1, False)
    assert isinstance(counts[1], redis.ResponseError)


def call(call_id: str) -> ToolCall:
    return ToolCall.model_validate(_envelope("t") | {"call_id": call_id})


def _envelope(tool: str) -> dict[str, Any]:
    call = ToolCall(
        call_id="c1", tool=tool, args={}, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", reply_to="t:results:s", dispatched_at=SENT_AT,
    )  # fmt: skip
    return call.model_dump(mode="json")


def guarded_deps(
    client: fakeredis.FakeRedis, settings: Settings, completions: Completions | None = None
) -> ToolTaskDeps:
    """A worker's task dependencies on `client`, deliveries counted."""
    return ToolTaskDeps(
        settings,
        ResultReporter(client, 1000),
        completions or Completions(client, KEYS),
        ToolServices(),
        DeliveryGuard(client, KEYS, settings.max_deliveries),
    )


class _ProcessDied(BaseException):
    """A tool's process dying mid-call, in-process: not an Exception, so nothing catches
    it as the tool's outcome and nothing is posted."""


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_the_delivery_past_the_limit_answers_worker_lost_and_does_not_run_the_tool(
    client: fakeredis.FakeRedis,
) -> None:
    runs: list[int] = []

    def crashy() -> str:
        """Counts its runs, then its process "dies": nothing is posted, nothing acked."""
        runs.append(1)
        raise _ProcessDied

    settings = Settings(redis_url="redis://unused", key_prefix="t", max_deliveries=2)
    deps = guarded_deps(client, settings)
    app = Celery("guard-test", set_as_current=False)
    register_tool_tasks(app, {"crashy": LocalTool(crashy)}, deps)
    task = app.tasks[task_name("crashy")]

    for _ in range(2):  # what a broker redelivering the same message does
        with pytest.raises(_ProcessDied):
            task.apply(args=[_envelope("crashy")])
    task.apply(args=[_envelope("crashy")])

    assert len(runs) == 2
    entries = client.xrange("t:results:s")
    results = [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()]) for _, fields in entries
    ]
    assert [r.status for r in results] == [CallStatus.ERROR]
    assert results[-1].response == {
        "status": "error",
        "error_type": "WorkerLost",
        "error_message": (
            "tool 'crashy' was delivered 2 times and its worker died each time, "
            "so it was not run again"
        ),
    }


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
@pytest.mark.parametrize("long_running", [False, True])
def test_a_call_the_orchestrator_closed_is_not_run_and_gets_no_ticket(
    client: fakeredis.FakeRedis, long_running: bool
) -> None:
    """Given a call answered already (it timed out in the queue), when a worker gets
    it: the tool does not run, nothing is posted and no ticket opens."""
    runs: list[int] = []

    def late() -> dict[str, str]:
        """Counts its runs."""
        runs.append(1)
        return {"status": "pending"}

    settings = Settings(redis_url="redis://unused", key_prefix="t")
    completions = Completions(client, KEYS)
    deps = guarded_deps(client, settings, completions)
    app = Celery("closed-test", set_as_current=False)
    name = f"late_{'ticket' if long_running else 'plain'}"  # task names are process-wide
    register_tool_tasks(app, {name: LocalTool(late, name, is_long_running=long_running)}, deps)
    client.set(KEYS.closed(S, "c1"), 1)

    app.tasks[task_name(name)].apply(args=[_envelope(name)])

    assert runs == []
    assert client.xlen("t:results:s") == 0
    assert completions.pending() == []


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_call_redelivered_after_its_result_was_posted_does_not_run_again(
    client: fakeredis.FakeRedis,
) -> None:
    """Its process died between posting the result and the broker's ack: the posted
    final result closed the call, so the redelivery runs nothing and posts nothing."""
    runs: list[int] = []

    def once() -> str:
        """Counts its runs."""
        runs.append(1)
        return "ran"

    settings = Settings(redis_url="redis://unused", key_prefix="t")
    deps = guarded_deps(client, settings)
    app = Celery("guard-test", set_as_current=False)
    register_tool_tasks(app, {"once": LocalTool(once)}, deps)
    for _ in range(2):
        app.tasks[task_name("once")].apply(args=[_envelope("once")])
    assert len(runs) == 1
    assert client.xlen("t:results:s") == 1
    assert client.exists(KEYS.closed(S, "c1"))


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_long_running_call_redelivered_after_it_posted_its_ticket_does_not_run_again(
    client: fakeredis.FakeRedis,
) -> None:
    """Its process died between posting the tool's pending answer and the broker's ack:
    the redelivery neither runs the tool again nor touches its ticket, and the job's
    final result is taken."""
    runs: list[int] = []

    def open_case() -> dict[str, str]:
        """Starts a job; a second start fails (the case exists upstream)."""
        runs.append(1)
        if len(runs) > 1:
            raise RuntimeError("the case is open already")
        return {"status": "pending", "case": "job-1"}

    settings = Settings(redis_url="redis://unused", key_prefix="t")
    completions = Completions(client, KEYS)
    deps = guarded_deps(client, settings, completions)
    app = Celery("ticket-redelivery-test", set_as_current=False)
    tool = LocalTool(open_case, "open_case_once", is_long_running=True)
    register_tool_tasks(app, {"open_case_once": tool}, deps)

    for _ in range(2):  # the message, then its redelivery
        app.tasks[task_name("open_case_once")].apply(args=[_envelope("open_case_once")])

    assert len(runs) == 1 and client.xlen("t:results:s") == 1
    ticket = completions.get("c1").ticket
    assert ticket == {"status": "pending", "case": "job-1"}
    completions.post_result("c1", {"status": "done"})  # the job's final result


def test_a_lone_delivery_whose_count_failed_raises_its_error(client: fakeredis.FakeRedis) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    client.set(KEYS.deliveries("c2", 0, SENT_AT), "not a number")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        guard.count(call("c2"), 0)
    assert guard.count(call("c1"), 0) == (1, False)


def test_a_batch_larger_than_one_run_is_counted_in_order(client: fakeredis.FakeRedis) -> None:
    guard = DeliveryGuard(client, KEYS, max_deliveries=3)
    n = COUNT_BATCH * 2 + 3
    client.set(KEYS.closed(S, "c7"), 1)
    client.set(KEYS.deliveries(f"c{COUNT_BATCH + 1}", 0, SENT_AT), "not a number")
    counts = guard.count_all([(call(f"c{i}"), 0, "w", False) for i in range(n)])
    assert len(counts) == n
    assert counts[7] == (1, True)
    assert isinstance(counts[COUNT_BATCH + 1], redis.ResponseError)
    assert all(c == (1, False) for i, c in enumerate(counts) if i not in (7, COUNT_BATCH + 1))
    assert client.hlen(KEYS.running(S)) == n - 1  # the failed one recorded nothing
