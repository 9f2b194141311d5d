"""The completion applier on fakeredis: it finds the session a completion names, reads
its call's pending record once, under that session's lease, and refuses a completion
whose call belongs to another session without touching either one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import fakeredis
import pytest
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from toolfleet.orchestrator.completions import applier as applier_module
from toolfleet.orchestrator.completions.applier import GROUP, CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import BackgroundTasks, SessionResumer
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.completions import KEPT_REFUSED_BYTES, NOT_KEPT, Completions
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import CallStatus, Completion, PendingCall
from toolfleet.shared.pending import PROGRESS_KEPT, PendingCalls

KEYS = Keys("t")
APP = "app"
ANN, BOB = session_key(APP, "ann", "s1"), session_key(APP, "bob", "s2")
STREAM = KEYS.completions(APP)


def call(call_id: str, session: SessionKey) -> PendingCall:
    _, user, session_id = session.split("/")
    return PendingCall(
        call_id=call_id, tool="open_ticket", session_id=session_id, app_name=APP,
        user_id=user, agent="root", invocation_id="i", ticket={"status": "pending"},
        created_at=time.time(),
    )  # fmt: skip


class ApplyingReplica:
    """One replica's applier over fakeredis, with a session store and leases; the
    sessions it would continue are recorded, not run."""

    def __init__(self, client: fakeredis.FakeAsyncRedis, sync: fakeredis.FakeRedis) -> None:
        self.store = SessionStore(client, KEYS)
        self.completions = Completions(sync, KEYS)
        runner = SimpleNamespace(
            settings=SimpleNamespace(secret_arg_names=(), max_json_depth=64),
            store=self.store,
            leases=Leases(client, KEYS, "replica-1", ttl_s=30),
        )
        self.resumer = SessionResumer({APP: cast(Runner, runner)}, BackgroundTasks())
        self.continued: list[SessionKey] = []
        self.resumer.continue_session = self._continue  # type: ignore[method-assign]
        self.applier = CompletionApplier(
            {APP: cast(Runner, runner)}, client, KEYS, self.resumer, "replica-1"
        )
        self.sync = sync

    async def _continue(self, _runner: Runner, session: SessionKey, *_: Any, **__: Any) -> None:
        self.continued.append(session)

    def entry(self, entry_id: str) -> PostedEntry:
        """The entry as the listener reads it."""
        ((_, fields),) = self.sync.xrange(STREAM, entry_id, entry_id)
        return PostedEntry.read(entry_id, fields, self.applier.max_json_depth)


@pytest.fixture
async def replica(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> ApplyingReplica:
    sync = fakeredis.FakeRedis(server=fake_server)
    sync.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    replica = ApplyingReplica(fake_redis, sync)
    await replica.store.create(APP, "ann", "s1")
    await replica.store.create(APP, "bob", "s2")
    return replica


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The call ids whose pending record is read from here on, by a command or in a
    pipeline, on an asyncio client."""
    reads: list[str] = []

    def counting(send: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: Any, *args: Any, **options: Any) -> Any:
            name = str(args[0]).upper()
            if name in ("HGET", "HMGET", "HGETALL") and args[1] == KEYS.pending():
                reads.extend(str(a) for a in args[2:] or ("*",))
            return send(self, *args, **options)

        return counted

    client_send, pipe_send = aioredis.Redis.execute_command, Pipeline.pipeline_execute_command
    monkeypatch.setattr(aioredis.Redis, "execute_command", counting(client_send))
    monkeypatch.setattr(Pipeline, "pipeline_execute_command", counting(pipe_send))
    return reads


async def test_each_completion_applied_reads_its_pending_record_once(
    replica: ApplyingReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert replica.completions.register(call("a1", ANN))
    replica.completions.post_result("a1", {"done": 50}, final=False)
    final = replica.completions.post_result("a1", {"done": 100})
    reads = record_reads(monkeypatch)

    # The later one is read first: the earlier one is taken over and applied before it.
    await replica.applier.apply(STREAM, replica.entry(final))

    assert reads == ["a1", "a1"]  # one read per entry applied, progress and final
    assert replica.continued == [ANN]
    assert replica.sync.xlen(STREAM) == 0
    assert replica.sync.hget(KEYS.pending(), "a1") is None
    events = (await replica.store.get(ANN)).events
    applied = [e.calls[0].status for e in events if e.author == "completion"]
    assert applied == [CallStatus.PENDING, CallStatus.SUCCESS]  # in posting order
    assert replica.sync.xlen(KEYS.dead_letters()) == 0


async def test_a_forged_completion_naming_another_session_is_dead_lettered_untouched(
    replica: ApplyingReplica,
) -> None:
    """An entry written past the poster (by anyone who may write the stream) for Bob's
    call, naming Ann's session, is refused: neither session changes."""
    assert replica.completions.register(call("b1", BOB))
    record = replica.sync.hget(KEYS.pending(), "b1")
    before = {s: (await replica.store.get(s)).events for s in (ANN, BOB)}
    forged = Completion(
        call_id="b1", session_key=ANN, response={"status": "approved"}, posted_at=time.time()
    )
    entry_id = replica.sync.xadd(STREAM, {"completion": forged.model_dump_json()}).decode()
    replica.sync.rpush(KEYS.completion_order(ANN), entry_id)

    await replica.applier.apply(STREAM, replica.entry(entry_id))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert letter[b"reason"].decode() == (
        f"completion names session {ANN!r} but call 'b1' belongs to another session"
    )
    assert replica.sync.xlen(STREAM) == 0
    assert replica.sync.llen(KEYS.completion_order(ANN)) == 0
    assert {s: (await replica.store.get(s)).events for s in (ANN, BOB)} == before
    assert replica.sync.hget(KEYS.pending(), "b1") == record
    assert replica.sync.smembers(KEYS.session_pending(BOB)) == {b"b1"}
    assert not replica.sync.exists(KEYS.session_pending(ANN))
    assert not replica.sync.exists(KEYS.applied("b1"))
    assert not replica.sync.exists(KEYS.closed(BOB, "b1"), KEYS.closed(ANN, "b1"))
    assert not replica.sync.smembers(KEYS.resume())
    assert replica.continued == []
    # Bob's call still takes its own result.
    replica.completions.post_result("b1", {"status": "approved"})
    ((posted_id, _),) = replica.sync.xrange(STREAM)
    await replica.applier.apply(STREAM, replica.entry(posted_id.decode()))
    assert replica.sync.hget(KEYS.pending(), "b1") is None
    assert replica.continued == [BOB]


async def test_a_completion_naming_no_session_is_refused_saying_so(
    replica: ApplyingReplica,
) -> None:
    assert replica.completions.register(call("a1", ANN))
    unnamed = Completion(call_id="a1", response={"status": "approved"}, posted_at=time.time())
    entry_id = replica.sync.xadd(STREAM, {"completion": unnamed.model_dump_json()}).decode()

    await replica.applier.apply(STREAM, replica.entry(entry_id))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert letter[b"reason"].decode().startswith("the completion for call 'a1' names no session")
    assert replica.sync.hget(KEYS.pending(), "a1") is not None
    assert replica.sync.xlen(STREAM) == 0


async def test_an_answer_to_an_earlier_question_of_the_call_is_refused(
    replica: ApplyingReplica,
) -> None:
    """Two confirmations posted while a call waits (two approvers, a double submit): the
    first is applied and the tool asks again; the second, posted for the first question,
    does not answer the new one."""
    asking = call("a1", ANN).model_copy(update={"kind": "confirmation", "ticket": {"hint": "?"}})
    assert replica.completions.register(asking)
    replica.completions.confirm("a1", True)
    stale = replica.completions.confirm("a1", True)
    # The first was applied and the call asked again: its record says so.
    asked_again = asking.model_copy(update={"asked_again": 1})
    replica.sync.hset(KEYS.pending(), "a1", PendingCalls(KEYS, frozenset()).record(asked_again))
    first_id = replica.sync.xrange(STREAM)[0][0].decode()
    replica.sync.xdel(STREAM, first_id)
    replica.sync.lrem(KEYS.completion_order(ANN), 1, first_id)

    await replica.applier.apply(STREAM, replica.entry(stale))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert "'a1' asked again since this answer was posted" in letter[b"reason"].decode()
    assert replica.completions.get("a1").asked_again == 1  # still waits for the new answer
    assert replica.continued == [] and replica.sync.xlen(STREAM) == 0
    # An answer posted now answers the question asked now.
    fresh = replica.completions.confirm("a1", False)
    assert replica.entry(fresh).completion.asked_again == 1  # type: ignore[union-attr]


async def test_a_large_result_posted_twice_is_dead_lettered_without_its_response(
    replica: ApplyingReplica,
) -> None:
    """Two posts of a result that both pass the poster's check (a double submit, before
    either is applied): the second is refused here, and its dead letter keeps the
    response's size, not the response - any caller of the API may post twice."""
    assert replica.completions.register(call("a1", ANN))
    big = {"report": "x" * 200_000}
    replica.completions.post_result("a1", big, source="http")
    again = replica.completions.post_result("a1", big, source="http")

    await replica.applier.apply(STREAM, replica.entry(again))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert letter[b"reason"] == b"call 'a1' already has its final result"
    assert len(letter[b"completion"]) <= KEPT_REFUSED_BYTES
    kept = Completion.model_validate_json(letter[b"completion"])
    assert kept.call_id == "a1" and kept.source == "http"
    size = len(json.dumps(big, separators=(",", ":")))
    assert kept.response == {NOT_KEPT: f"{size} bytes of JSON"}


async def test_a_large_unreadable_entry_is_dead_lettered_as_its_size(
    replica: ApplyingReplica,
) -> None:
    garbage = b"{" + b"x" * 200_000
    entry_id = replica.sync.xadd(STREAM, {"completion": garbage}).decode()

    await replica.applier.apply(STREAM, replica.entry(entry_id))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert letter[b"reason"].startswith(b"malformed completion")
    assert len(letter[b"reason"]) <= KEPT_REFUSED_BYTES
    assert json.loads(letter[b"completion"]) == {NOT_KEPT: f"{len(garbage)} bytes"}
    assert replica.sync.xlen(STREAM) == 0


async def test_a_tickets_record_keeps_only_its_latest_progress(replica: ApplyingReplica) -> None:
    """Progress posted without end (a job reporting every second for hours) leaves the
    record - read by every post and every listing of the tickets - its latest reports
    only; the session keeps each one as an event."""
    assert replica.completions.register(call("a1", ANN))
    posts = PROGRESS_KEPT + 5
    for n in range(posts):
        entry_id = replica.completions.post_result("a1", {"done": n}, final=False)
        await replica.applier.apply(STREAM, replica.entry(entry_id))

    kept = replica.completions.get("a1").progress
    assert kept == [{"done": n} for n in range(posts - PROGRESS_KEPT, posts)]
    events = (await replica.store.get(ANN)).events
    assert sum(e.author == "completion" for e in events) == posts


async def test_progress_applied_as_the_worker_records_the_ticket_keeps_both(
    replica: ApplyingReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job the tool started posts progress while the tool still runs; the worker then
    records the tool's initial response in the ticket (it holds no session lease),
    between the applier's read of the record and its script. The script wrote back the
    record it had read: the ticket lost its initial response."""
    opened = call("a1", ANN).model_copy(update={"ticket": {}})
    assert replica.completions.register(opened)
    entry_id = replica.completions.post_result("a1", {"done": 10}, final=False)
    initial = opened.model_copy(update={"ticket": {"status": "pending", "ticket": "T-1"}})
    apply_script = applier_module._APPLY.run
    raced = False

    async def worker_writes_first(*args: Any) -> Any:
        nonlocal raced
        if not raced:  # the worker's post of the tool's initial response, as it lands
            raced = True
            record = PendingCalls(KEYS, frozenset()).record(initial)
            replica.sync.hset(KEYS.pending(), "a1", record)
        return await apply_script(*args)

    monkeypatch.setattr(applier_module._APPLY, "run", worker_writes_first)
    await replica.applier.apply(STREAM, replica.entry(entry_id))

    kept = replica.completions.get("a1")
    assert kept.ticket == {"status": "pending", "ticket": "T-1"}
    assert kept.progress == [{"done": 10}]
    assert replica.sync.xlen(STREAM) == 0
    assert replica.sync.xlen(KEYS.dead_letters()) == 0
    events = (await replica.store.get(ANN)).events
    assert sum(e.author == "completion" for e in events) == 1


async def test_progress_applied_restarts_the_sessions_idle_clock(
    replica: ApplyingReplica,
) -> None:
    """A session expires once idle (no event written) for its time to live. A job's
    progress is an event written: a session whose call reports progress every day was
    still dropped 30 days after its last turn, and the job's final result refused."""
    assert replica.completions.register(call("a1", ANN))
    almost_idle = [KEYS.session(ANN), KEYS.events(ANN), KEYS.session_pending(ANN)]
    for key in almost_idle:
        replica.sync.expire(key, 5)
    entry_id = replica.completions.post_result("a1", {"done": 10}, final=False)

    await replica.applier.apply(STREAM, replica.entry(entry_id))

    ttl = replica.store.limits.ttl_s
    for key in almost_idle:
        assert ttl - 60 < replica.sync.ttl(key) <= ttl, key


async def test_an_entry_whose_applying_always_raises_is_set_aside_for_the_later_ones(
    replica: ApplyingReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given Ann's first completion failing to apply every time (a bug: it would hold back
    each later completion of her session, which applies it first), when it has raised
    MAX_APPLY_FAILURES times it goes to the dead letters saying so and the later one
    applies; Redis failing meanwhile is not counted against it."""
    assert replica.completions.register(call("a1", ANN))
    assert replica.completions.register(call("a2", ANN))
    replica.completions.post_result("a1", {"status": "approved"})
    later = replica.completions.post_result("a2", {"status": "approved"})
    make_event = CompletionApplier._event
    redis_down = False

    def event(self: CompletionApplier, pending: PendingCall, completion: Completion) -> Any:
        if redis_down:
            raise aioredis.ConnectionError("Redis is restarting")
        if pending.call_id == "a1":
            raise KeyError("a bug in applying it")
        return make_event(self, pending, completion)

    monkeypatch.setattr(CompletionApplier, "_event", event)
    redis_down = True
    with pytest.raises(aioredis.ConnectionError):
        await replica.applier.apply(STREAM, replica.entry(later))
    redis_down = False
    for _ in range(applier_module.MAX_APPLY_FAILURES - 1):
        with pytest.raises(KeyError, match="a bug in applying it"):
            await replica.applier.apply(STREAM, replica.entry(later))
        assert replica.sync.xlen(STREAM) == 2 and replica.continued == []

    await replica.applier.apply(STREAM, replica.entry(later))

    ((_, letter),) = replica.sync.xrange(KEYS.dead_letters())
    assert (
        letter[b"reason"]
        .decode()
        .startswith(f"applying it raised KeyError {applier_module.MAX_APPLY_FAILURES} times")
    )
    assert json.loads(letter[b"completion"])["call_id"] == "a1"
    assert replica.sync.xlen(STREAM) == 0 and replica.sync.llen(KEYS.completion_order(ANN)) == 0
    assert replica.sync.hget(KEYS.pending(), "a1") is not None  # still open: post it again
    assert replica.sync.hget(KEYS.pending(), "a2") is None
    assert replica.continued == [ANN]
    assert not replica.sync.keys(KEYS.apply_failures(STREAM, "*"))


async def test_a_session_stores_a_bounded_number_of_one_calls_progress_reports(
    replica: ApplyingReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress posted without end cannot grow the session without end (compaction keeps
    every event after a call still pending): past PROGRESS_EVENTS_STORED of one call's
    reports the ticket's record takes them alone; its final result is stored as ever, and
    another call's progress is counted apart."""
    monkeypatch.setattr(applier_module, "PROGRESS_EVENTS_STORED", 3)
    assert replica.completions.register(call("a1", ANN))
    assert replica.completions.register(call("a2", ANN))
    for n in range(5):
        entry_id = replica.completions.post_result("a1", {"done": n}, final=False)
        await replica.applier.apply(STREAM, replica.entry(entry_id))
    entry_id = replica.completions.post_result("a2", {"done": 0}, final=False)
    await replica.applier.apply(STREAM, replica.entry(entry_id))

    assert replica.completions.get("a1").progress[-1] == {"done": 4}  # the record has it
    assert replica.sync.xlen(STREAM) == 0 and not replica.sync.xrange(KEYS.dead_letters())
    assert replica.sync.sismember(KEYS.session_pending(ANN), "a1")
    final = replica.completions.post_result("a1", {"done": "all"})
    await replica.applier.apply(STREAM, replica.entry(final))
    events = (await replica.store.get(ANN)).events
    a1 = [e for e in events if e.author == "completion" and e.calls[0].call_id == "a1"]
    a2 = [e for e in events if e.author == "completion" and e.calls[0].call_id == "a2"]
    assert [e.progress for e in a1[:-1]] == [{"done": n} for n in range(3)]
    assert a1[-1].progress is None  # the final result, stored
    assert len(a2) == 1
    assert not replica.sync.exists(KEYS.progress_stored(ANN, "a1"))


async def test_progress_past_the_stored_bound_reaches_watchers_and_keeps_the_session_alive(
    replica: ApplyingReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report past PROGRESS_EVENTS_STORED is kept in the ticket's record alone, but it
    is still news: watchers of the session get it as they got the others, and it
    restarts the session's idle clock (a ticket may post progress for longer than the
    session would otherwise live). The model is not asked: nothing was stored."""
    monkeypatch.setattr(applier_module, "PROGRESS_EVENTS_STORED", 2)
    seen: list[tuple[SessionKey, Any]] = []
    replica.resumer._on_update = lambda session, update: seen.append((session, update))
    assert replica.completions.register(call("a1", ANN))
    session_hash = KEYS.session(ANN)
    ttl_s = replica.store.limits.ttl_s
    for n in range(4):
        replica.sync.expire(session_hash, 5)  # the idle clock ran down meanwhile
        entry_id = replica.completions.post_result("a1", {"done": n}, final=False)
        await replica.applier.apply(STREAM, replica.entry(entry_id))
        assert replica.sync.ttl(session_hash) > ttl_s - 5, n

    assert [(s, u.progress) for s, u in seen] == [(ANN, {"done": n}) for n in range(4)]
    stored = [e for e in (await replica.store.get(ANN)).events if e.author == "completion"]
    assert [e.progress for e in stored] == [{"done": 0}, {"done": 1}]
    assert replica.completions.get("a1").progress[-1] == {"done": 3}
    assert replica.continued == []
