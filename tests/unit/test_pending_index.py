"""The per-session sets of pending call ids (Keys.session_pending) and the age index
(Keys.pending_by_age) on fakeredis: every path that writes or removes a pending record
changes its session's set and the index in the same step, a session's calls are read
from its set alone, tickets are counted by age from the index alone, and records
written before the sets or the index existed are indexed on the first read."""

from __future__ import annotations

import asyncio
import json
import math
import time
from types import SimpleNamespace
from typing import Any, cast

import fakeredis
import pytest

from toolfleet.orchestrator.adkwire.session_ops import delete_session
from toolfleet.orchestrator.completions.applier import GROUP, CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.mcpserve.final_results import FinalResults
from toolfleet.orchestrator.sessions.compaction import SessionLimits
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.orchestrator.sessions.parked import ParkedTurns
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.cancellation import cancel_session
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.errors import CallNotPendingError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import (
    CallStatus,
    Completion,
    PendingCall,
    ToolActions,
    ToolResult,
)
from toolfleet.shared.pending import PendingCalls

KEYS = Keys("t")
TTL_S = 3600
ANN, BOB = session_key("app", "ann", "s1"), session_key("app", "bob", "s2")


def call(call_id: str, session: SessionKey = ANN, **update: Any) -> PendingCall:
    app, user, session_id = session.split("/")
    fields: dict[str, Any] = {
        "call_id": call_id, "tool": "open_ticket", "session_id": session_id,
        "app_name": app, "user_id": user, "agent": "root", "invocation_id": "i",
        "ticket": {"status": "pending"}, "created_at": time.time(),
    }  # fmt: skip
    return PendingCall(**(fields | update))


def event() -> Event:
    return Event(invocation_id="i", author="root")


async def consistent(client: fakeredis.FakeAsyncRedis) -> dict[str, set[str]]:
    """Each session's pending ids, after checking the hash, the sets and the age index
    hold the same ids: every record in its session's set and in the index at its creation
    time, every id of a set or of the index recorded."""
    by_session: dict[str, set[str]] = {}
    created: dict[str, float] = {}
    for raw in (await client.hgetall(KEYS.pending())).values():
        record = PendingCall.model_validate_json(raw)
        by_session.setdefault(record.session_key, set()).add(record.call_id)
        created[record.call_id] = record.created_at
    sets: dict[str, set[str]] = {}
    async for name in client.scan_iter(match=KEYS.session_pending(SessionKey("*"))):
        session = name.decode().removeprefix(KEYS.session_pending(SessionKey("")))
        sets[session] = {m.decode() for m in await client.smembers(name)}
    assert sets == by_session
    indexed = await client.zrange(KEYS.pending_by_age(), 0, -1, withscores=True)
    assert {member.decode(): score for member, score in indexed} == created
    return by_session


def aged(client: fakeredis.FakeRedis) -> dict[str, float]:
    """The age index: call id -> creation time."""
    indexed = client.zrange(KEYS.pending_by_age(), 0, -1, withscores=True)
    return {member.decode(): score for member, score in indexed}


@pytest.fixture
def store(fake_redis: fakeredis.FakeAsyncRedis) -> SessionStore:
    return SessionStore(fake_redis, KEYS, limits=SessionLimits(ttl_s=TTL_S))


async def test_appends_record_update_resolve_and_close_calls_in_their_sessions_sets(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    ann, bob = await store.create("app", "ann", "s1"), await store.create("app", "bob", "s2")
    await store.append(ann, event(), pending=[call("a1"), call("a2"), call("a3")])
    await store.append(bob, event(), pending=[call("b1", BOB)])
    assert await consistent(fake_redis) == {ANN: {"a1", "a2", "a3"}, BOB: {"b1"}}
    assert [c.call_id for c in await store.pending_calls(ANN)] == ["a1", "a2", "a3"]
    assert [c.call_id for c in await store.pending_calls(BOB)] == ["b1"]
    # The set lives as long as the session's other keys.
    assert 0 < await fake_redis.ttl(KEYS.session_pending(ANN)) <= TTL_S

    progressed = call("a1", progress=[{"done": 50}])
    await store.append(ann, event(), pending=[progressed])  # an update, not a new call
    await store.append(ann, event(), resolved=call("a2"), closed=["a3"])
    assert await consistent(fake_redis) == {ANN: {"a1"}, BOB: {"b1"}}
    (left,) = await store.pending_calls(ANN)
    assert left.progress == [{"done": 50}]

    await store.append(ann, event(), closed=["a1"])
    assert await consistent(fake_redis) == {BOB: {"b1"}}
    assert await store.pending_calls(ANN) == []
    assert not await fake_redis.exists(KEYS.session_pending(ANN))  # an empty set goes


async def test_one_sessions_read_does_not_read_the_whole_hash(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann, bob = await store.create("app", "ann", "s1"), await store.create("app", "bob", "s2")
    await store.append(bob, event(), pending=[call(f"b{n}", BOB) for n in range(500)])
    await store.append(ann, event(), pending=[call("a1")])
    await store.pending_calls(ANN)  # indexes once (an empty hash here) and marks it

    async def whole_hash(*_: object) -> None:
        raise AssertionError("read every pending record for one session")

    monkeypatch.setattr(PendingCalls, "aall", whole_hash)
    monkeypatch.setattr(PendingCalls, "aindex_all", whole_hash)
    assert [c.call_id for c in await store.pending_calls(ANN)] == ["a1"]
    assert len(await store.pending_calls(BOB)) == 500
    assert await store.pending_calls(session_key("app", "ann", "none")) == []


def test_a_worker_opens_and_withdraws_a_ticket_with_its_session_set() -> None:
    client = fakeredis.FakeRedis()
    client.hset(KEYS.session(ANN), "app_name", "app")
    client.expire(KEYS.session(ANN), TTL_S)
    completions = Completions(client, KEYS)

    opened = call("a1")
    assert completions.register(opened)
    assert client.smembers(KEYS.session_pending(ANN)) == {b"a1"}
    assert aged(client) == {"a1": opened.created_at}
    assert 0 < client.pttl(KEYS.session_pending(ANN)) <= TTL_S * 1000  # the session's TTL
    completions.withdraw(ANN, "a1")
    assert client.hlen(KEYS.pending()) == 0
    assert not client.exists(KEYS.session_pending(ANN))
    assert aged(client) == {}

    client.set(KEYS.closed(ANN, "a2"), 1)  # answered (timed out) before the worker ran it
    assert not completions.register(call("a2"))
    assert client.hlen(KEYS.pending()) == 0
    assert not client.exists(KEYS.session_pending(ANN))


async def test_a_parked_call_answered_leaves_its_record_and_its_set(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    batch = WriteBatch()
    waiting = [call(c, kind="credential", turn_id="t1") for c in ("c2", "c3")]
    PendingCalls(KEYS).stage_put(batch, waiting)
    await batch.run(fake_redis)
    done = ToolResult(
        call_id="c1", tool="t", session_id="s1", invocation_id="i",
        status=CallStatus.SUCCESS, response={},
    )  # fmt: skip
    asks = ToolActions(requested_auth={"auth_scheme": "x"})
    turn = [done, *(done.model_copy(update={"call_id": c, "actions": asks}) for c in ("c2", "c3"))]
    parked = ParkedTurns(fake_redis, KEYS)
    await parked.park("t1", turn, None)
    # c2 ran again with its credential; c3 still waits: c2 no longer does, once the step
    # that stores the outcome ran.
    got = await parked.complete("t1", done.model_copy(update={"call_id": "c2"}), None, ANN)
    assert got.ordered is None
    assert await consistent(fake_redis) == {ANN: {"c2", "c3"}}
    batch = WriteBatch()
    got.stage(batch)
    await batch.run(fake_redis)
    assert await consistent(fake_redis) == {ANN: {"c3"}}


async def test_an_applied_completion_changes_the_record_and_the_set_together(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    sync = fakeredis.FakeRedis(server=fake_redis.connection_pool.connection_kwargs["server"])
    store = SessionStore(fake_redis, KEYS)
    await store.create("app", "ann", "s1")
    await store.create("app", "bob", "s2")
    completions = Completions(sync, KEYS)
    for pending in (call("a1"), call("a2"), call("b1", BOB)):
        assert completions.register(pending)
    sync.xgroup_create(KEYS.completions("app"), GROUP, id="0", mkstream=True)
    sync.set("lease", "token")
    hold = cast(LeaseHold, SimpleNamespace(fence=SimpleNamespace(key="lease", token="token")))
    applier = CompletionApplier({}, fake_redis, KEYS, cast(Any, None), "replica-1")

    async def apply(call_id: str, final: bool) -> None:
        entry_id = completions.post_result(call_id, {"done": final}, final=final)
        raw = sync.xrange(KEYS.completions("app"), entry_id, entry_id)[0][1]
        entry = PostedEntry.read(entry_id, raw, applier.max_json_depth)
        assert isinstance(entry.completion, Completion)
        pending = completions.get(call_id)
        read = sync.hget(KEYS.pending(), call_id)
        assert read is not None
        stream = KEYS.completions("app")
        await applier._script(stream, entry, entry.completion, (pending, read), hold)

    await apply("a1", final=False)  # progress: the record stays, updated
    assert await consistent(fake_redis) == {ANN: {"a1", "a2"}, BOB: {"b1"}}
    assert completions.get("a1").progress == [{"done": False}]
    await apply("a1", final=True)
    assert await consistent(fake_redis) == {ANN: {"a2"}, BOB: {"b1"}}
    await fake_redis.delete(KEYS.session(ANN))  # the session is gone: its ticket goes
    await apply("a2", final=True)
    assert await consistent(fake_redis) == {BOB: {"b1"}}
    assert await store.pending_calls(BOB) == [completions.get("b1")]


def test_a_served_calls_claimed_result_leaves_its_record_and_its_set() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    served = session_key("app", "mcp", "mcp-r1")
    assert completions.register(call("m1", served, agent=SERVED_AGENT))
    completions.post_result("m1", {"answer": 42})
    results = FinalResults(client, KEYS, completions, "app", "mcp")
    assert results.fetch("m1") == {"answer": 42}
    assert client.hlen(KEYS.pending()) == 0
    assert not client.exists(KEYS.session_pending(served))
    assert aged(client) == {}


@pytest.mark.parametrize(
    ("answered_in", "told"),
    [
        (session_key("app", "mcp", "mcp-r1"), True),  # a call this server made
        (session_key("app", "ann", "mcp-r1"), False),  # another user's session
        (session_key("other", "mcp", "mcp-r1"), False),  # another app's
        (ANN, False),  # an agent's session
    ],
)
def test_an_answered_call_is_described_only_to_the_server_that_made_it(
    answered_in: SessionKey, told: bool
) -> None:
    client = fakeredis.FakeRedis()
    claim = {"entry": "1-0", "session": answered_in, "at": 1.0, "answer": "rejected"}
    client.set(KEYS.applied("c1"), json.dumps(claim))
    results = FinalResults(client, KEYS, Completions(client, KEYS), "app", "mcp")

    fetched = results.fetch("c1")

    assert isinstance(fetched, dict) and fetched["error_type"] == "UnknownCall"
    assert ("rejected" in fetched["error_message"]) is told
    assert ("no pending call" in fetched["error_message"]) is not told


async def test_records_written_before_the_sets_are_indexed_on_the_first_read(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    await store.create("app", "ann", "s1")
    await store.create("app", "bob", "s2")
    gone = session_key("app", "cy", "expired")
    old = [call(f"a{n}", created_at=n) for n in range(2500)] + [call("b1", BOB), call("g1", gone)]
    for pending in old:  # as a deployment before the sets wrote them: the hash alone
        await fake_redis.hset(KEYS.pending(), pending.call_id, pending.model_dump_json())

    assert [c.call_id for c in await store.pending_calls(ANN)] == [f"a{n}" for n in range(2500)]
    assert await fake_redis.exists(KEYS.pending_indexed())
    assert [c.call_id for c in await store.pending_calls(BOB)] == ["b1"]
    assert 0 < await fake_redis.ttl(KEYS.session_pending(BOB)) <= TTL_S
    # A session gone before the upgrade gets no set: its records are refused on apply.
    assert not await fake_redis.exists(KEYS.session_pending(gone))
    # Indexing again (another replica at the same time) changes nothing.
    await PendingCalls(KEYS).aindex_all(fake_redis)
    assert len(await fake_redis.smembers(KEYS.session_pending(ANN))) == 2500


async def test_deleting_a_session_closes_and_removes_its_pending_calls(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    ann, bob = await store.create("app", "ann", "s1"), await store.create("app", "bob", "s2")
    await store.append(ann, event(), pending=[call("a1"), call("a2")])
    await store.append(bob, event(), pending=[call("b1", BOB)])
    dropped = await PendingCalls(KEYS).adrop_session(
        fake_redis, ANN, KEYS.session(ANN), KEYS.events(ANN)
    )
    assert dropped == 2
    assert await consistent(fake_redis) == {BOB: {"b1"}}
    assert await fake_redis.exists(KEYS.closed(ANN, "a1"), KEYS.closed(ANN, "a2")) == 2
    assert not await fake_redis.exists(KEYS.session(ANN), KEYS.events(ANN))


async def test_a_deleted_sessions_call_still_queued_opens_no_ticket_when_taken(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, fake_server: fakeredis.FakeServer
) -> None:
    """A long-running call waits in its pool's queue when its session is deleted: the
    worker that takes it later opens no ticket, which would stay listed as pending and
    be answered to a new session of the same id, one that never made the call."""
    await store.create("app", "ann", "s1")
    await fake_redis.sadd(KEYS.dispatched(ANN), "q1")  # sent with its turn, not yet taken
    await delete_session(cast(Any, SimpleNamespace(keys=KEYS, redis=fake_redis)), *ANN.split("/"))
    await store.create("app", "ann", "s1")  # the user starts again, with the same id

    sync = fakeredis.FakeRedis(server=fake_server)
    assert not PendingCalls(KEYS).open(sync, call("q1"))  # the worker does not run it
    completions = Completions(sync, KEYS)
    assert completions.pending() == []
    with pytest.raises(CallNotPendingError):
        completions.post_result("q1", {"status": "approved"})
    assert not await fake_redis.exists(KEYS.dispatched(ANN))


async def test_readers_at_once_before_the_sets_index_the_records_once(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create("app", "ann", "s1")
    old = call("a1")
    await fake_redis.hset(KEYS.pending(), old.call_id, old.model_dump_json())
    runs: list[int] = []
    index_all = PendingCalls.aindex_all

    async def counted(self: PendingCalls, client: fakeredis.FakeAsyncRedis) -> None:
        runs.append(1)
        await index_all(self, client)

    monkeypatch.setattr(PendingCalls, "aindex_all", counted)
    reads = await asyncio.gather(*(store.pending_calls(ANN) for _ in range(8)))
    assert [[c.call_id for c in read] for read in reads] == [["a1"]] * 8
    assert len(runs) == 1


async def test_counts_per_session_come_from_the_sets_alone(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann, bob = await store.create("app", "ann", "s1"), await store.create("app", "bob", "s2")
    old = call("a0")  # from before the sets: counted once indexed
    await fake_redis.hset(KEYS.pending(), old.call_id, old.model_dump_json())
    await store.append(ann, event(), pending=[call("a1"), call("a2")])
    await store.append(bob, event(), pending=[call("b1", BOB)])
    none = session_key("app", "ann", "none")
    assert await store.pending_counts([ANN, BOB, none]) == [3, 1, 0]

    async def read(*_: object) -> None:
        raise AssertionError("read pending records to count them")

    monkeypatch.setattr(PendingCalls, "aall", read)
    await store.append(ann, event(), closed=["a0", "a1"])
    assert await store.pending_counts([ANN, BOB]) == [1, 1]
    assert await store.pending_counts([]) == []


async def test_records_written_before_the_age_index_are_added_on_the_first_read(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    await store.create("app", "ann", "s1")
    gone = session_key("app", "cy", "expired")
    old = [call("a1", created_at=100.0), call("g1", gone, created_at=200.0)]
    for pending in old:  # indexed in the sets by an earlier version, not in the age index
        await fake_redis.hset(KEYS.pending(), pending.call_id, pending.model_dump_json())
    await fake_redis.sadd(KEYS.session_pending(ANN), "a1")
    await fake_redis.set(KEYS.pending_indexed(), 1)

    counts = await PendingCalls(KEYS).acount_created(fake_redis, [(0.0, 150.0), (150.0, 300.0)])
    # A gone session's record is counted until a completion for it is refused.
    assert counts == [1, 1]
    indexed = await fake_redis.zrange(KEYS.pending_by_age(), 0, -1, withscores=True)
    assert indexed == [(b"a1", 100.0), (b"g1", 200.0)]
    assert await fake_redis.get(KEYS.pending_indexed()) == b"2"
    assert not await fake_redis.exists(KEYS.session_pending(gone))


async def test_tickets_are_counted_by_age_from_the_index_alone(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = await store.create("app", "ann", "s1")
    now = time.time()
    ages = {"fresh": 5.0, "edge": 60.0, "hour": 1800.0, "old": 90_000.0, "ahead": -30.0}
    await store.append(
        ann, event(), pending=[call(name, created_at=now - age) for name, age in ages.items()]
    )

    async def read(*_: object) -> None:
        raise AssertionError("read pending records to count them")

    monkeypatch.setattr(PendingCalls, "aall", read)
    spans = [(now - 60, math.inf), (now - 3600, now - 60), (now - 86400, now - 3600)]
    spans.append((-math.inf, now - 86400))
    # A ticket exactly 60 s old is past the first minute; one stamped ahead (another
    # host's clock) is in the first.
    assert await PendingCalls(KEYS).acount_created(fake_redis, spans) == [2, 2, 0, 1]


def test_cancelling_a_session_reads_only_its_own_tickets(monkeypatch: pytest.MonkeyPatch) -> None:
    client = fakeredis.FakeRedis()
    for session in (ANN, BOB):
        client.hset(KEYS.session(session), "app_name", "app")
    completions = Completions(client, KEYS)
    assert completions.register(call("a1")) and completions.register(call("b1", BOB))
    client.set(KEYS.pending_indexed(), "2")  # as an orchestrator's first read leaves it

    def read_all(*_: object) -> None:
        raise AssertionError("read every pending record to cancel one session")

    monkeypatch.setattr(PendingCalls, "all", read_all)
    assert cancel_session(client, KEYS, completions, ANN) == ["a1"]


async def test_the_oldest_tickets_are_read_alone_oldest_first(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = await store.create("app", "ann", "s1")
    await store.append(
        ann, event(), pending=[call(f"a{n}", created_at=1000.0 - n) for n in range(30)]
    )

    async def read(*_: object) -> None:
        raise AssertionError("read every pending record to find the oldest")

    monkeypatch.setattr(PendingCalls, "aall", read)
    oldest = await PendingCalls(KEYS).aoldest(fake_redis, 3)
    assert [c.call_id for c in oldest] == ["a29", "a28", "a27"]
    assert await PendingCalls(KEYS).aoldest(fake_redis, 0) == []
