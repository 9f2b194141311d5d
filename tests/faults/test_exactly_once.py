"""Exactly once, where it used to break: a call answered before it started, a completion
whose session is gone, two completions of one call read by two replicas, and an agent
tool's child session running past the lease TTL while every replica sweeps. Each runs
with the tool queues on Redis and on RabbitMQ (through the outbox relay).

Invariant under test: per function call id exactly one final function response reaches
the model, and every posted completion is applied or dead-lettered with its reason.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.faults import probe
from tests.faults.brokers import ON_EACH_BROKER
from tests.faults.conftest import fault_settings
from tests.faults.exactly_once_tools import (
    ASKING_ROUNDS,
    case_opener,
    delegator,
    holder,
    interrupted,
    signing,
    state_writer,
    ticketing,
)
from tests.faults.input_tools import gate_key
from tests.faults.servers import RedisServer
from tests.faults.test_orchestrator_faults import call_ids, response_ids, toolfleet
from tests.support import first_deliveries, until
from toolfleet import (
    AlreadyCompletedError,
    CallNotPendingError,
    CallStatus,
    Completions,
    Event,
    LeaseLostError,
    Runner,
    Settings,
)
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.completions.applier import GROUP, CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import BackgroundTasks, SessionResumer
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.outbox import outbox_key
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.protocol import function_calls
from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.keys import Keys, SessionKey, queue_name, session_key
from toolfleet.shared.messages import COMPLETION_FIELD, Completion

pytestmark = ON_EACH_BROKER

Figure = Callable[[str, object], None]
INTERRUPTED = "tests.faults.exactly_once_tools:interrupted"


def of_u(app: str, session_id: str) -> SessionKey:
    """The key of user u's session `session_id` of `app` (every session here is u's)."""
    return session_key(app, "u", session_id)


def stored_events(client: redis.Redis, keys: Keys, session: SessionKey) -> list[Event]:
    return [Event.model_validate_json(e) for e in client.lrange(keys.events(session), 0, -1)]


def final_responses(events: list[Event], call_id: str) -> list[dict[str, Any]]:
    """The function responses of `call_id` the model saw, in order."""
    return [
        dict(part.function_response.response or {})
        for event in events
        for part in (event.content.parts or () if event.content else ())
        if part.function_response and part.function_response.id == call_id
    ]


def dead_letter_reasons(client: redis.Redis, keys: Keys) -> list[str]:
    return [fields[b"reason"].decode() for _, fields in client.xrange(keys.dead_letters())]


async def test_a_long_running_call_answered_before_it_started_never_runs_nor_opens_a_ticket(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, report_figure: Figure
) -> None:
    """Given the only worker process busy, a long-running call waits in the queue past
    its deadline and the model is told it timed out. When the worker gets to it, it is
    not run, no ticket is opened, and a result posted for it is refused."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)

    def holding_started() -> bool:
        ids = call_ids(stored_events(client, keys, of_u("holder", "held")))
        return bool(ids) and probe.executions(client, settings.key_prefix, ids[0]) > 0

    async with Runner(holder, settings) as holding, Runner(case_opener, settings) as opening:
        held = asyncio.create_task(holding.ask(user_id="u", session_id="held", message="go"))
        await until(holding_started, "the worker to start the holding call", 10)
        updates = [u async for u in opening.run(user_id="u", session_id="late", message="go")]
        client.rpush(gate_key(settings.key_prefix, "hold"), 1)  # let the worker go
        await asyncio.wait_for(held, 15)
    (case,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert case.status is CallStatus.ERROR and case.response["error_type"] == "TimeoutError"
    # The worker took the message (its delivery counter) and dropped it unrun.
    await until(lambda: first_deliveries(client, keys, case.call_id) > 0, "the late delivery", 15)
    assert probe.executions(client, settings.key_prefix, case.call_id) == 0
    assert client.hget(keys.pending(), case.call_id) is None
    with pytest.raises(CallNotPendingError):
        Completions(client, keys).post_result(case.call_id, {"status": "closed"})
    assert final_responses(
        stored_events(client, keys, of_u("case_opener", "late")), case.call_id
    ) == [case.response]
    report_figure("late long-running call run / ticketed", "0 / 0")


async def ticket_turn(settings: Settings, session_id: str) -> str:
    """Run `ticketing` once: its call id, now pending."""
    async with Runner(ticketing, settings) as runner:
        updates = [u async for u in runner.run(user_id="u", session_id=session_id, message="go")]
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.status is CallStatus.PENDING
    return result.call_id


async def test_a_completion_whose_session_is_gone_is_dead_lettered_and_its_ticket_removed(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)
    call_id = await ticket_turn(settings, "doomed")
    async with Orchestrator([ticketing], settings):
        client.delete(
            keys.session(of_u("ticketing", "doomed")), keys.events(of_u("ticketing", "doomed"))
        )
        Completions(client, keys).post_result(call_id, {"status": "refunded"})
        await until(lambda: dead_letter_reasons(client, keys), "a dead letter", 15)
    gone = f"session {of_u('ticketing', 'doomed')} is gone; its ticket was removed"
    assert dead_letter_reasons(client, keys) == [gone]
    assert client.hget(keys.pending(), call_id) is None
    assert client.xlen(keys.completions("ticketing")) == 0  # consumed, not left to retry
    assert client.llen(keys.completion_order(of_u("ticketing", "doomed"))) == 0


def read_one(client: redis.Redis, stream: str, consumer: str) -> tuple[str, bytes]:
    """XREADGROUP one entry as `consumer`: that replica has read it (and not applied it)."""
    ((_, ((entry_id, fields),)),) = client.xreadgroup(GROUP, consumer, {stream: ">"}, count=1)
    return entry_id.decode(), fields[COMPLETION_FIELD.encode()]


async def test_two_completions_of_one_call_read_by_two_replicas_apply_in_posting_order(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    """Given two final results posted for one call, the first read by replica A (which
    stalls) and the second by replica B: B applies the first one first (taking it over),
    then refuses the second. A finds nothing left to do. The first accepted wins."""
    keys = Keys(settings.key_prefix)
    stream = keys.completions("ticketing")
    workers.start(["default"], concurrency=1)
    call_id = await ticket_turn(settings, "twice")
    completions = Completions(client, keys)
    client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    first = completions.post_result(call_id, {"status": "refunded"})
    second = completions.post_result(call_id, {"status": "denied"})
    assert completions.waiting(completions.get(call_id)) == [first, second]
    first_id, first_raw = read_one(client, stream, "replica-a")
    assert first_id == first
    second_id, second_raw = read_one(client, stream, "replica-b")
    assert second_id == second

    async with Replica(settings, replica_id="replica-b") as replica:
        runner = Runner(ticketing, replica=replica)
        resumer = SessionResumer({"ticketing": runner}, BackgroundTasks())
        applier = CompletionApplier({"ticketing": runner}, replica.redis, keys, resumer, "b")
        completion = Completion.model_validate_json(second_raw)
        await applier.apply(stream, PostedEntry(second_id, second_raw, completion))
        # Replica A wakes up and handles what it read: it is gone already.
        late = Completion.model_validate_json(first_raw)
        await applier.apply(stream, PostedEntry(first, first_raw, late))

    events = stored_events(client, keys, of_u("ticketing", "twice"))
    assert final_responses(events, call_id)[1:] == [{"status": "refunded"}]  # after the ticket
    assert dead_letter_reasons(client, keys) == [f"call {call_id!r} already has its final result"]
    assert (
        client.xlen(stream) == 0
        and client.llen(keys.completion_order(of_u("ticketing", "twice"))) == 0
    )
    assert client.hget(keys.pending(), call_id) is None
    with pytest.raises(AlreadyCompletedError, match=rf"\(completion {first} applied at "):
        completions.get(call_id)  # what `toolfleet tickets show` and GET /tickets/... say


@pytest.fixture
def short_lease_settings(redis_server: RedisServer) -> Settings:
    return fault_settings(redis_server.url(), lease_ttl_s=1)


async def test_an_agent_tool_child_running_past_the_lease_ttl_is_not_swept(
    short_lease_settings: Settings, client: redis.Redis
) -> None:
    """Given a child session that runs 2.5 s with a 1 s lease TTL while the replica
    sweeps owed sessions every second, the sweep leaves it to its worker: the parent
    gets the child's real answer."""
    settings = short_lease_settings
    keys = Keys(settings.key_prefix)
    with WorkerGroup(settings) as workers:
        workers.start(["default"], concurrency=2)
        workers.start(["agents"], concurrency=1)
        async with Orchestrator([delegator], settings) as orch:
            runner = orch.runner("delegator")
            answer = await runner.ask(user_id="u", session_id="parent", message="go")
    assert answer.startswith("researcher: {'result': 'researched: yes'}"), answer
    children = f"{keys.session(of_u('delegator', 'parent'))}.*"  # its id: parent.<call id>
    (child,) = [k.decode() for k in client.keys(children)]
    child_id = SessionKey(child.removeprefix(f"{keys.prefix}:session:"))
    errors = [e.error for e in stored_events(client, keys, child_id) if e.error]
    unknown = [
        r
        for e in stored_events(client, keys, child_id)
        for r in (e.calls or ())
        if r.status is CallStatus.ERROR
    ]
    assert errors == [] and unknown == []
    assert not client.sismember(keys.resume(), child_id)


async def test_a_turn_cut_short_by_a_crash_is_finished_before_a_message_or_completion_lands(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    tmp_path: Path,
    report_figure: Figure,
) -> None:
    """Given a replica SIGKILLed while its turn's slow call runs - the turn's ticket open
    - when the ticket's result and the user's next message arrive, the next replica
    first answers the open turn's calls, then takes the message, then applies the
    result: every call gets one final response, and never a call without one."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=2)
    replica = toolfleet(
        settings, tmp_path / "a.log",
        "run", "--agent", INTERRUPTED, "--user", "u", "--session", "cut", "--no-wait", "go",
    )  # fmt: skip
    try:

        def slow_call_running() -> bool:
            ids = call_ids(stored_events(client, keys, of_u("interrupted", "cut")))
            return len(ids) == 2 and probe.executions(client, settings.key_prefix, ids[1]) > 0

        await until(slow_call_running, "the slow lookup to start", 20)
        replica.send_signal(signal.SIGKILL)
        replica.wait(10)
    finally:
        replica.kill()
    ticket_id, lookup_id = call_ids(stored_events(client, keys, of_u("interrupted", "cut")))
    Completions(client, keys).post_result(ticket_id, {"status": "refunded"})
    await until(
        lambda: not client.exists(keys.lease(of_u("interrupted", "cut"))),
        "the dead replica's lease",
        10,
    )

    async with Orchestrator([interrupted], settings) as orch:
        answer = await orch.runner("interrupted").ask(user_id="u", session_id="cut", message="next")
        assert await orch.wait_until_settled(of_u("interrupted", "cut"), 20)
    events = stored_events(client, keys, of_u("interrupted", "cut"))
    order = [
        ("user", e.content.parts[0].text) if e.author == "user" and e.content and e.content.parts
        else (e.author, tuple(call_ids([e])) or tuple(response_ids([e])))
        for e in events
        if e.content is not None
    ]  # fmt: skip
    assert order[:4] == [
        ("user", "go"),
        ("interrupted", (ticket_id, lookup_id)),
        ("interrupted", (ticket_id, lookup_id)),  # the open turn's responses, first
        ("user", "next"),
    ], order
    assert answer == "noted: next"
    assert order[5] == ("completion", (ticket_id,)), order  # after the message's answer
    assert final_responses(events, lookup_id) == [{"found": True}]
    assert final_responses(events, ticket_id) == [
        {"status": "pending", "subject": "refund"},
        {"status": "refunded"},
    ]
    assert Session("cut", "interrupted", "u", events).open_turn() is None
    report_figure("responses per call (ticket incl. pending, lookup)", "2, 1")


async def test_a_completion_whose_apply_fails_midway_is_applied_once_on_takeover(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given the first attempt to apply a completion failing (Redis error) after the
    replica read it and took the session's lease, the entry is not lost: nothing was
    applied, and the takeover (XAUTOCLAIM) applies it exactly once."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)
    call_id = await ticket_turn(settings, "flaky")
    failures: list[str] = []
    apply_script = CompletionApplier._script

    async def fail_once(self: CompletionApplier, *args: Any) -> Event | None:
        if not failures:
            failures.append("injected")
            raise redis.ConnectionError("injected: Redis went away mid-apply")
        return await apply_script(self, *args)

    monkeypatch.setattr(CompletionApplier, "_script", fail_once)
    async with Orchestrator([ticketing], settings, claim_idle_ms=500) as orch:
        Completions(client, keys).post_result(call_id, {"status": "refunded"})
        assert await orch.wait_until_settled(of_u("ticketing", "flaky"), 20)
    events = stored_events(client, keys, of_u("ticketing", "flaky"))
    assert failures == ["injected"]
    assert final_responses(events, call_id)[1:] == [{"status": "refunded"}]
    assert client.xlen(keys.completions("ticketing")) == 0
    assert dead_letter_reasons(client, keys) == []


@pytest.mark.parametrize("how", ["taken over", "renewals fail"])
async def test_a_replica_that_lost_its_lease_mid_turn_cannot_write_the_session(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """Given the lease lost while the turn's slow call runs - another holder took it
    (the replica paused past the TTL, say), or every renewal fails (Redis unreachable
    from this replica) until it expires - the replica's write of the responses is
    refused and it stops: nothing of it lands after it lost the lease."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)
    if how == "renewals fail":

        async def unreachable(self: Leases, session: SessionKey, owner: str) -> bool:
            raise redis.ConnectionError("injected: Redis unreachable from this replica")

        monkeypatch.setattr(Leases, "renew", unreachable)
    async with Runner(interrupted, settings) as runner:
        turn = asyncio.create_task(runner.ask(user_id="u", session_id="lost", message="go"))

        def slow_call_running() -> bool:
            ids = call_ids(stored_events(client, keys, of_u("interrupted", "lost")))
            return len(ids) == 2 and probe.executions(client, settings.key_prefix, ids[1]) > 0

        await until(slow_call_running, "the slow lookup to start", 20)
        before = client.llen(keys.events(of_u("interrupted", "lost")))
        if how == "taken over":
            client.set(keys.lease(of_u("interrupted", "lost")), "another-replica/1", px=60_000)
        with pytest.raises(LeaseLostError, match="lost the session's lease"):
            await asyncio.wait_for(turn, 20)
    assert client.llen(keys.events(of_u("interrupted", "lost"))) == before
    if how == "taken over":
        assert client.get(keys.lease(of_u("interrupted", "lost"))) == b"another-replica/1"


async def test_a_turn_whose_calls_cannot_be_sent_is_not_stored_and_nothing_is_left_open(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given sending a turn's calls failing (the broker unreachable past the retries): the
    model's turn is stored only in the step that sends its calls, so nothing of it is
    stored and no call is left without a response; the caller gets the error and the
    session owes nothing (as for any failed invocation without an open turn); the user's
    next message starts afresh and is answered."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=2)
    publish = CeleryPublisher.publish
    failures: list[str] = []

    async def fail_once(self: CeleryPublisher, *args: Any, **kwargs: Any) -> None:
        if not failures:
            failures.append("injected")
            raise redis.ConnectionError("injected: the broker is unreachable")
        await publish(self, *args, **kwargs)

    monkeypatch.setattr(CeleryPublisher, "publish", fail_once)
    async with Runner(interrupted, settings) as runner:
        with pytest.raises(redis.ConnectionError, match="injected"):
            await runner.ask(user_id="u", session_id="failed", message="go")
        assert not client.sismember(
            keys.resume(), of_u("interrupted", "failed")
        )  # nothing open to finish
        after_failure = stored_events(client, keys, of_u("interrupted", "failed"))
        assert [e.author for e in after_failure] == ["user"]  # no model turn, no call
        assert client.llen(queue_name("default")) == 0  # and nothing on the queue
        assert client.llen(outbox_key(keys)) == 0  # nor bound for RabbitMQ's
        answer = await runner.ask(user_id="u", session_id="failed", message="next")
    events = stored_events(client, keys, of_u("interrupted", "failed"))
    assert not any(e.content and function_calls(e.content) for e in events)
    texts = [e.content.parts[0].text for e in events if e.author == "user" and e.content]
    assert texts == ["go", "next"] and answer == "noted: next"
    assert Session("failed", "interrupted", "u", events).open_turn() is None


async def test_a_bad_state_write_is_answered_at_once_and_nothing_of_it_is_stored(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    """Given a tool writing a value that is not JSON, and one writing more than the
    payload limit, to its state: each call is answered ResultRejected at once (not a
    timeout), naming the key, and neither write reaches the session or later calls."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=2)
    async with Runner(state_writer, settings) as runner:
        updates = [u async for u in runner.run(user_id="u", session_id="bad", message="go")]
    results = {u.result.tool: u.result for u in updates if isinstance(u, CallFinished)}
    unjson, huge = results["write_unjson"], results["write_huge"]
    assert (
        unjson.response["error_type"] == "ResultRejected"
        and "'when'" in unjson.response["error_message"]
    )
    assert (
        huge.response["error_type"] == "ResultRejected"
        and "'blob'" in huge.response["error_message"]
    )
    assert unjson.duration_s < settings.default_timeout_s and not unjson.state_delta
    assert client.hgetall(keys.session_state(of_u("state_writer", "bad"))) == {}


async def test_a_call_confirmed_round_after_round_runs_each_time_it_is_sent(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    """A tool that asks a person again after each run is sent again once each answer
    comes, more times than a call may be delivered: each send is a message of its own,
    run once (not a copy of the first, nor a crash loop), until it files."""
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)
    async with Orchestrator([signing], settings) as orch:
        runner = orch.runner("signing")
        await runner.ask(user_id="u", session_id="rounds", message="go")
        session = of_u("signing", "rounds")
        for _ in range(ASKING_ROUNDS):
            (request,) = await runner.store.pending_calls(session)
            asked = request.asked_again
            Completions(client, keys).confirm(request.call_id, True)

            def answered(call_id: str = request.call_id, asked: int = asked) -> bool:
                record = client.hget(keys.pending(), call_id)
                return record is None or f'"asked_again":{asked + 1}'.encode() in record

            await until(answered, "the confirmed call to run and ask again", 20)
        assert await orch.wait_until_settled(session, 20)
        call_id = request.call_id
        events = stored_events(client, keys, session)
        assert final_responses(events, call_id)[-1] == {"filed": True, "runs": ASKING_ROUNDS + 1}
        assert probe.executions(client, settings.key_prefix, call_id) == ASKING_ROUNDS + 1
