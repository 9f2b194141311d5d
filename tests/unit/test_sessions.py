"""SessionStore on fakeredis: scoped state, incremental event reads, leases."""

from __future__ import annotations

import json

import fakeredis
import pytest
from google.genai import types
from redis.asyncio.client import Pipeline

from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.events_cache import EventsCache
from toolfleet.orchestrator.sessions.leases import LeaseClaim, Leases
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.errors import SessionBusyError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import CallStatus

KEYS = Keys("t")
S1 = session_key("app", "ann", "s1")  # the session most tests use
BOB_S2 = session_key("app", "bob", "s2")


def text_event(text: str, delta: dict[str, object] | None = None) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(invocation_id="i", author="user", content=content, state_delta=delta or {})


async def test_state_scopes_land_in_their_own_hashes(store: SessionStore) -> None:
    mine = await store.create("app", "ann", "s1")
    await store.append(mine, text_event("x", {"k": 1, "user:lang": "fr", "app:v": 2, "temp:t": 3}))
    other_session = await store.create("app", "ann", "s2")
    other_user = await store.create("app", "bob", "s3")
    assert other_session.state == {"user:lang": "fr", "app:v": 2}
    assert other_user.state == {"app:v": 2}
    assert (await store.get(S1)).state == {"k": 1, "user:lang": "fr", "app:v": 2}


async def test_appended_events_count_against_the_cache_and_push_out_older_sessions(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    cache = EventsCache(max_size=100)
    store = SessionStore(fake_redis, KEYS, cache=cache)
    responses = [types.Part.from_function_response(name="t", response={}) for _ in range(40)]
    wide = Event(invocation_id="i", author="a", content=types.Content(role="user", parts=responses))
    for n in range(3):
        session = await store.create("app", "ann", f"w{n}")
        await store.append(session, wide)  # 41 each: the third pushes the first out
    kept = [n for n in range(3) if cache.get(session_key("app", "ann", f"w{n}"))]
    assert kept == [1, 2] and cache.size == 82
    # A session pushed out is read whole again, and counted.
    assert len((await store.get(session_key("app", "ann", "w0"))).events) == 1
    assert cache.get(session_key("app", "ann", "w0")) is not None and cache.size <= 100


async def test_events_written_by_another_replica_are_read_incrementally_in_order(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    writer, reader = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    session = await writer.create("app", "ann", "s1")
    await writer.append(session, text_event("one"))
    assert [e.content.parts[0].text for e in (await reader.get(S1)).events] == ["one"]  # type: ignore[union-attr, index]
    await writer.append(session, text_event("two"))
    await writer.append(session, text_event("three"))
    texts = [e.content.parts[0].text for e in (await reader.get(S1)).events]  # type: ignore[union-attr, index]
    assert texts == ["one", "two", "three"]
    # Redis lost events (a restart without persistence): the reader trusts Redis.
    await fake_redis.ltrim(KEYS.events(S1), 0, 0)
    assert len((await reader.get(S1)).events) == 1


async def test_an_events_call_records_are_stored_and_read_back_by_another_replica(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    writer, reader = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    records = [
        CallRecord(call_id="c1", tool="t", status=CallStatus.SUCCESS, worker="w@h", pid=7),
        CallRecord(call_id="c2", tool="t", status=CallStatus.ERROR, attempt=2),
    ]
    session = await writer.create("app", "ann", "s1")
    await writer.append(session, Event(invocation_id="i", author="a", calls=records))
    (stored,) = await fake_redis.lrange(KEYS.events(S1), 0, -1)
    # Each record as its own JSON says it, defaults left out.
    assert json.loads(stored)["calls"] == [
        json.loads(r.model_dump_json(exclude_defaults=True)) for r in records
    ]
    (read,) = (await reader.get(S1)).events
    assert list(read.calls) == records


async def test_appends_interleaved_with_another_replica_are_read_back_whole_and_in_order(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    one, two = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    session = await one.create("app", "ann", "s1")
    await one.append(session, text_event("a"))  # cached by `one` as written
    await two.append(await two.get(S1), text_event("b"))
    await one.append(session, text_event("c"))  # `one` missed "b": it must not trust its cache
    texts = [e.content.parts[0].text for e in (await one.get(S1)).events]  # type: ignore[union-attr, index]
    assert texts == ["a", "b", "c"]


async def test_a_session_lease_excludes_other_holders_until_released(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    leases = Leases(fake_redis, KEYS, "replica", ttl_s=5)
    await store.create("app", "ann", "s1")
    await leases.acquire(S1, "replica-a/1")
    with pytest.raises(SessionBusyError, match="being run by another orchestrator"):
        await leases.acquire(S1, "replica-b/1")
    await leases.release(S1, "replica-b/1")  # not the holder: nothing happens
    with pytest.raises(SessionBusyError):
        await leases.acquire(S1, "replica-b/1")
    assert await leases.unleased([S1, BOB_S2]) == [BOB_S2]
    await leases.release(S1, "replica-a/1")
    await leases.acquire(S1, "replica-b/1")


def claim(session: SessionKey, owner: str) -> LeaseClaim:
    return LeaseClaim(session, KEYS.lease(session), owner, 5, KEYS.applied_writes(session))


async def test_reading_a_session_can_take_its_lease_in_the_same_round_trip(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    await store.create("app", "ann", "s1")
    await store.get(S1, lease=claim(S1, "replica-a/1"))
    assert await fake_redis.get(KEYS.lease(S1)) == b"replica-a/1"
    await store.get(S1, lease=claim(S1, "replica-a/1"))  # its own: fine
    busy = r"being run by another orchestrator \(replica-a/1\)"
    with pytest.raises(SessionBusyError, match=busy):
        await store.get(S1, lease=claim(S1, "replica-b/1"))
    # A session that does not exist is created, then read under the lease.
    created = await store.get_or_create("app", "bob", "s2", lease=claim(BOB_S2, "replica-b/1"))
    assert created.user_id == "bob"
    assert await fake_redis.get(KEYS.lease(BOB_S2)) == b"replica-b/1"


# --- the user's message appended in the round trip of the session read -------------------


def texts(events: list[Event]) -> list[str | None]:
    return [e.content.parts[0].text if e.content and e.content.parts else None for e in events]


async def stored_texts(fake_redis: fakeredis.FakeAsyncRedis) -> list[str | None]:
    return texts((await SessionStore(fake_redis, KEYS).get(S1)).events)


async def test_a_message_rides_on_the_read_of_a_session_read_before(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """Given a session this replica read, when the next message comes, it is appended
    in the read's round trip, fenced by the lease taken there, and owes the model a turn."""
    session = await store.create("app", "ann", "s1")
    await store.append(session, text_event("one"))
    session, stored = await store.get_and_append(
        "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("two"),
        owes_turn=True,
    )  # fmt: skip
    assert stored
    assert texts(session.events) == ["one", "two"]
    assert await stored_texts(fake_redis) == ["one", "two"]
    assert await store.sessions_to_resume() == [S1]
    assert await fake_redis.ttl(KEYS.events(S1)) > 0
    assert texts((await store.get(S1)).events) == ["one", "two"]  # the cache kept it


async def test_a_message_waits_when_the_session_changed_since_it_was_read(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """Given another replica appended since this one read the session, the message is not
    written with the read (the caller appends it after what it now sees)."""
    session = await store.create("app", "ann", "s1")
    await SessionStore(fake_redis, KEYS).append(session, text_event("elsewhere"))
    session, stored = await store.get_and_append(
        "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("mine")
    )
    assert not stored
    assert texts(session.events) == ["elsewhere"]
    assert await stored_texts(fake_redis) == ["elsewhere"]


async def test_a_message_never_rides_past_an_open_turn(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """Given a model turn whose call has no response (its invocation died), the message
    is not appended with the read: that turn is answered first."""
    session = await store.create("app", "ann", "s1")
    call = types.Part(function_call=types.FunctionCall(id="c1", name="add", args={}))
    turn = Event(
        invocation_id="i", author="agent", content=types.Content(role="model", parts=[call])
    )
    await store.append(session, turn)
    session, stored = await store.get_and_append(
        "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("next")
    )
    assert not stored
    assert session.open_turn() is not None
    assert len((await SessionStore(fake_redis, KEYS).get(S1)).events) == 1


async def test_a_message_is_not_written_for_a_busy_session(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    await store.create("app", "ann", "s1")
    await fake_redis.set(KEYS.lease(S1), "replica-b/1")
    with pytest.raises(SessionBusyError):
        await store.get_and_append(
            "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("x")
        )
    assert await stored_texts(fake_redis) == []
    assert await store.sessions_to_resume() == []


async def test_a_message_for_a_new_session_and_after_a_script_flush(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """A new session takes the message with its first read; after Redis forgot its scripts
    (a restart) the guarded write runs again by its text, once."""
    for text in ("one", "two"):
        await fake_redis.script_flush()
        _, stored = await store.get_and_append(
            "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event(text)
        )
        assert stored
    assert await stored_texts(fake_redis) == ["one", "two"]


async def test_a_new_sessions_first_message_costs_its_create_and_one_read(
    fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session this replica just created is known to be empty: its first read does not
    look up its app and user, nor read it whole before the read that takes the message."""
    sent: list[str] = []
    execute_command, execute = fake_redis.execute_command, Pipeline.execute

    async def command(*args: object, **options: object) -> object:
        sent.append(str(args[0]))
        return await execute_command(*args, **options)

    async def pipeline(self: Pipeline, *args: object, **options: object) -> object:
        sent.append(f"pipeline of {len(self.command_stack)}")
        return await execute(self, *args, **options)

    monkeypatch.setattr(fake_redis, "execute_command", command)
    monkeypatch.setattr(Pipeline, "execute", pipeline)
    store = SessionStore(fake_redis, KEYS)
    for session_id in ("s0", "s1"):  # s0 loads the scripts
        sent.clear()
        lease = claim(session_key("app", "ann", session_id), "replica-a/1")
        session, stored = await store.get_and_append(
            "app", "ann", session_id, lease=lease, message=text_event("one")
        )
    assert stored and texts(session.events) == ["one"] and session.user_id == "ann"
    # The lookup that finds no session, its create, and the read that appends the message.
    assert [s.split()[0] for s in sent] == ["EXISTS", "EVALSHA", "pipeline"]
    assert await stored_texts(fake_redis) == ["one"]


def test_authored_contents_follow_appends_and_a_replaced_history() -> None:
    """Each model step asks for the contents; each call reads only what was appended
    since, and a history changed otherwise (replaced, cut) is read again whole."""
    first, second, progress = (
        text_event("one"),
        text_event("two"),
        Event(invocation_id="i", author="x"),
    )
    session = Session("s1", "app", "ann", [first, progress])
    assert session.authored_contents() == (["user"], [first.content])
    session.events.append(second)
    authors, contents = session.authored_contents()
    assert contents == [first.content, second.content] and authors == ["user", "user"]
    contents.append(first.content)  # the caller's copy: the next call is not affected
    session.events = [second]
    assert session.authored_contents() == (["user"], [second.content])
    session.events.clear()
    assert session.authored_contents() == ([], [])
