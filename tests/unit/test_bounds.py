"""Bounds: the call cap of a turn, the listener's session locks,
session history compaction and expiry - with an in-process runner and fakeredis."""

from __future__ import annotations

import asyncio

import fakeredis
import pytest
from google.genai import types
from pydantic import ValidationError

from tests.unit.test_loop import make_agent, responses, run
from toolfleet.orchestrator.completions.resumer import SessionLocks
from toolfleet.orchestrator.httpapi.errors import status_of
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.orchestrator.models.protocol import ModelRequest, function_calls
from toolfleet.orchestrator.sessions.compaction import SessionLimits, keep_from
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.events_cache import CachedSession, EventsCache
from toolfleet.orchestrator.sessions.fencing import write
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CompletionsFullError, SessionNotFoundError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import CallStatus

KEYS = Keys("t")
S1 = session_key("app", "u1", "s1")


# --- the call cap of one turn ----------------------------------------------------------


async def test_calls_beyond_the_turn_cap_are_answered_with_errors_and_not_dispatched(
    store: SessionStore,
) -> None:
    made = [Call("add", {"a": i, "b": 1}) for i in range(5)]
    agent, _ = make_agent(call(*made), say("ok"))
    updates, runner, _ = await run(store, agent, "go", max_calls_per_turn=3)

    answered = responses(updates)
    assert [r.response for r in answered[:3]] == [{"result": 1}, {"result": 2}, {"result": 3}]
    for late in answered[3:]:
        assert late.response is not None and late.response["error_type"] == "TooManyCalls"
        message = late.response["error_message"]
        # The model is told the limit, that the first calls ran, and what to do.
        assert "made 5 function calls" in message and "at most 3 calls of one turn" in message
        assert "the first 3 ran and the other 2" in message
        assert "TOOLFLEET_MAX_CALLS_PER_TURN" in message and "at most 3 calls per turn" in message
    model_turn = next(u for u in updates if isinstance(u, Event) and u.author == agent.name)
    call_ids = [c.id for c in function_calls(model_turn.content)]  # type: ignore[arg-type]
    assert runner.batches == [call_ids[:3]]  # only the first 3 were sent


def test_the_defaults_run_a_turn_of_ten_thousand_calls_in_one_wave() -> None:
    """The guard is sized for a fleet, not for a few waves: every call of a turn up to it
    is sent at once, and one io worker process runs them all at once."""
    default = {name: field.default for name, field in Settings.model_fields.items()}
    assert default["max_calls_per_turn"] == 10_000
    assert default["max_parallel_calls"] >= default["max_calls_per_turn"]
    assert default["io_concurrency"] >= default["max_calls_per_turn"]
    assert default["io_threads"] == 200  # sync tools' threads stay few
    # and its results wait on one session's stream without being trimmed unread
    assert default["results_maxlen"] >= 2 * default["max_calls_per_turn"]


def test_a_results_stream_capped_below_a_turn_is_refused_saying_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLFLEET_MAX_CALLS_PER_TURN", "5000")
    monkeypatch.setenv("TOOLFLEET_RESULTS_MAXLEN", "4000")
    with pytest.raises(ValidationError) as refused:
        Settings()
    message = str(refused.value)
    assert "TOOLFLEET_RESULTS_MAXLEN (4000) is below TOOLFLEET_MAX_CALLS_PER_TURN (5000)" in message
    assert "set TOOLFLEET_RESULTS_MAXLEN to 10000" in message
    monkeypatch.setenv("TOOLFLEET_RESULTS_MAXLEN", "5000")
    assert Settings().results_maxlen == 5000


async def test_a_turn_one_call_over_the_default_cap_runs_all_the_others_at_once(
    store: SessionStore,
) -> None:
    """Every turn size up to the default cap runs, in one dispatch: the model's 10,001st
    call is the only one refused, and its answer says the limit."""
    cap = Settings.model_fields["max_calls_per_turn"].default
    made = [Call("add", {"a": i, "b": 1}) for i in range(cap + 1)]
    agent, _ = make_agent(call(*made), say("ok"))
    updates, runner, _ = await run(store, agent, "go")

    answered = responses(updates)
    assert [r.response for r in answered[:cap]] == [{"result": i + 1} for i in range(cap)]
    assert len(runner.batches) == 1 and len(runner.batches[0]) == cap
    last = answered[cap].response
    assert last is not None and last["error_type"] == "TooManyCalls"
    assert f"at most {cap:,} calls of one turn" in last["error_message"]


# --- the listener's per-session locks ----------------------------------------------------


async def test_session_locks_are_dropped_once_nobody_holds_or_waits() -> None:
    locks = SessionLocks()
    inside: dict[str, int] = {}
    overlaps = 0

    async def work(session_id: str) -> None:
        nonlocal overlaps
        async with locks.hold(session_id):
            inside[session_id] = inside.get(session_id, 0) + 1
            overlaps += inside[session_id] > 1
            await asyncio.sleep(0)  # ok: yields to the other task of the session
            inside[session_id] -= 1

    # Two tasks per session (one waits for the other), over many sessions.
    await asyncio.gather(*(work(f"s{i % 500}") for i in range(1_000)))
    assert overlaps == 0
    assert len(locks) == 0

    # A waiter cancelled while it waits leaves nothing behind either.
    async with locks.hold("busy"):
        waiter = asyncio.create_task(work("busy"))
        await asyncio.sleep(0)  # ok: lets the waiter start waiting
        assert len(locks) == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert len(locks) == 0


def test_a_full_completions_stream_is_answered_503() -> None:
    assert status_of(CompletionsFullError("full")) == 503


# --- session history compaction ------------------------------------------------------------


def user(text: str) -> Event:
    return Event(
        invocation_id="i",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def model_calls(*call_ids: str) -> Event:
    parts = [types.Part(function_call=types.FunctionCall(id=c, name="t")) for c in call_ids]
    return Event(invocation_id="i", author="a", content=types.Content(role="model", parts=parts))


def answers(call_id: str, status: CallStatus = CallStatus.SUCCESS) -> Event:
    response = types.FunctionResponse(id=call_id, name="t", response={"ok": True})
    return Event(
        invocation_id="i",
        author="a",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        calls=[CallRecord(call_id=call_id, tool="t", status=status)],
    )


def model_text(text: str) -> Event:
    return Event(
        invocation_id="i",
        author="a",
        content=types.Content(role="model", parts=[types.Part(text=text)]),
    )


def turn(n: int, status: CallStatus = CallStatus.SUCCESS) -> list[Event]:
    return [user(f"q{n}"), model_calls(f"c{n}"), answers(f"c{n}", status), model_text(f"a{n}")]


def test_compaction_cuts_whole_turns_at_a_users_message() -> None:
    events = [e for n in range(5) for e in turn(n)]  # 20 events, 4 per turn
    assert keep_from(events, 20) == 0
    assert keep_from(events, 10) == 12  # turns 3 and 4: 8 events (12 would split a turn)
    assert keep_from(events, 8) == 12
    assert keep_from(events, 3) == 16  # the newest turn is kept whole


def test_compaction_keeps_a_call_whose_final_result_is_still_to_come() -> None:
    # Turn 0's call is long-running: its response is 'pending' and no final one came.
    events = turn(0, CallStatus.PENDING) + [e for n in range(1, 5) for e in turn(n)]
    assert keep_from(events, 10) == 0
    # Once its final result is in (a completion event), turns before it can go.
    events.append(answers("c0"))
    assert keep_from(events, 10) == 0  # the completion is the newest: the call stays
    events += turn(5) + turn(6)
    cut = keep_from(events, 10)
    assert cut == 21  # the first user message after the completion
    kept = events[cut:]
    assert kept[0].author == "user" and len(kept) == 8


def test_compaction_never_drops_a_turn_parked_for_a_credential() -> None:
    parked = [user("q0"), model_calls("c0"), Event(invocation_id="i", author="a",
              credential_requests=[{"call_id": "c0"}])]  # fmt: skip
    events = parked + [e for n in range(1, 5) for e in turn(n)]
    assert keep_from(events, 8) == 0


def assert_well_formed(contents: list[types.Content]) -> None:
    """Contents open with a user's message; every response follows its call."""
    first = contents[0]
    assert first.role == "user" and any(p.text for p in first.parts or ())
    called: set[str] = set()
    for content in contents:
        for part in content.parts or ():
            if part.function_call:
                called.add(part.function_call.id or "")
            if part.function_response:
                assert part.function_response.id in called


async def test_the_model_runs_on_a_compacted_session(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    store = SessionStore(fake_redis, KEYS, limits=SessionLimits(max_events=10))
    reader = SessionStore(fake_redis, KEYS)  # another replica, with a cached copy
    agent, model = make_agent(call(Call("add", {"a": 1, "b": 2})), say("three"))
    for n in range(6):
        if n == 2:
            await reader.get(S1)  # cached before the cuts
        updates, _, _ = await run(store, agent, f"question {n}")
        assert responses(updates)[0].response == {"result": 3}

    stored = await store.get(S1)
    assert 4 <= len(stored.events) <= 10
    assert_well_formed(stored.contents())
    assert (await reader.get(S1)).events == stored.events  # the cut is seen elsewhere
    fresh = await SessionStore(fake_redis, KEYS).get(S1)
    assert fresh.events == stored.events
    last: ModelRequest = model.requests[-1]
    assert_well_formed(list(last.contents))
    assert len(last.contents) <= 10 + 3  # the kept history plus this invocation's turn


class ForgetfulCache(EventsCache):
    """A busy replica's cache, where other sessions always push this one out."""

    def put(self, key: SessionKey, cached: CachedSession) -> list[CachedSession]:
        return [cached]


async def test_a_session_the_replica_does_not_cache_is_compacted_too(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A busy replica's cache drops sessions between their reads and their writes: the
    history stays bounded all the same."""
    uncached = ForgetfulCache()
    store = SessionStore(fake_redis, KEYS, limits=SessionLimits(max_events=10), cache=uncached)
    agent, _ = make_agent(call(Call("add", {"a": 1, "b": 2})), say("three"))
    for n in range(8):
        await run(store, agent, f"question {n}")
        assert len(uncached) == 0

    assert await fake_redis.llen(KEYS.events(S1)) <= 10
    stored = await store.get(S1)
    assert len(stored.events) >= 4
    assert_well_formed(stored.contents())


# --- session expiry --------------------------------------------------------------------------


async def test_every_write_restarts_a_sessions_idle_clock(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    store = SessionStore(fake_redis, KEYS, limits=SessionLimits(ttl_s=3_600))
    session = await store.create("app", "u1", "s1")
    assert 0 < await fake_redis.ttl(KEYS.session(S1)) <= 3_600
    await fake_redis.expire(KEYS.session(S1), 10)  # time passes
    await store.append(session, user("hello"))
    for key in (KEYS.session(S1), KEYS.events(S1), KEYS.user_sessions("app", "u1")):
        assert 3_500 < await fake_redis.ttl(key) <= 3_600


async def test_every_fenced_write_restarts_the_idle_clock_of_every_session_key(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Given keys whose clocks ran down, when a writer holding the lease appends an event
    with state, every key of the session (and the user's list) gets the full TTL again."""
    store = SessionStore(fake_redis, KEYS, limits=SessionLimits(ttl_s=3_600))
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    session = await store.create("app", "u1", "s1")
    await fake_redis.xadd(KEYS.results(S1), {"r": "1"})
    keys = (
        KEYS.session(S1),
        KEYS.events(S1),
        KEYS.session_state(S1),
        KEYS.results(S1),
        KEYS.user_sessions("app", "u1"),
    )
    async with leases.hold(S1) as hold:
        for n in range(2):
            for key in keys:
                await fake_redis.expire(key, 10)  # time passes
            event = user("hello")
            event.state_delta = {"seen": n}
            await store.append(session, event, fence=hold.fence)
            for key in keys:
                assert 3_500 < await fake_redis.ttl(key) <= 3_600, key
    assert (await store.get(S1)).state == {"seen": 1}


async def test_the_ttls_of_a_step_come_after_its_commands_and_once_per_key(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A key created by the step's own commands gets its TTL; replies are the commands'."""
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    for fenced in (False, True):
        await fake_redis.delete("k")
        batch = WriteBatch()
        batch.refresh_ttl(100, "k")
        batch.rpush("k", "a")
        batch.refresh_ttl(50, "k")  # the last one holds
        if fenced:
            async with leases.hold(S1) as hold:
                replies = await write(fake_redis, batch, hold.fence)
        else:
            replies = await write(fake_redis, batch, None)
        assert replies == [1]
        assert 40 < await fake_redis.ttl("k") <= 50


async def test_an_expired_session_is_not_found_even_when_cached(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    store = SessionStore(fake_redis, KEYS)
    session = await store.create("app", "u1", "s1")
    await store.append(session, user("hello"))
    await store.get(S1)  # cached
    await fake_redis.delete(KEYS.session(S1), KEYS.events(S1))  # what expiry does
    with pytest.raises(SessionNotFoundError):
        await store.get(S1)


async def test_sessions_kept_forever_with_ttl_zero(fake_redis: fakeredis.FakeAsyncRedis) -> None:
    store = SessionStore(fake_redis, KEYS, limits=SessionLimits(ttl_s=0))
    session = await store.create("app", "u1", "s1")
    await store.append(session, user("hello"))
    assert await fake_redis.ttl(KEYS.session(S1)) == -1
    assert await fake_redis.ttl(KEYS.events(S1)) == -1
