"""SessionStore on fakeredis: scoped state, incremental event reads, leases."""

from __future__ import annotations

import fakeredis
import pytest
from google.genai import types

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import LeaseClaim, Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.errors import SessionBusyError
from toolfleet.shared.keys import Keys

KEYS = Keys("t")


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
    assert (await store.get("s1")).state == {"k": 1, "user:lang": "fr", "app:v": 2}


async def test_events_written_by_another_replica_are_read_incrementally_in_order(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    writer, reader = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    session = await writer.create("app", "ann", "s1")
    await writer.append(session, text_event("one"))
    assert [e.content.parts[0].text for e in (await reader.get("s1")).events] == ["one"]  # type: ignore[union-attr, index]
    await writer.append(session, text_event("two"))
    await writer.append(session, text_event("three"))
    texts = [e.content.parts[0].text for e in (await reader.get("s1")).events]  # type: ignore[union-attr, index]
    assert texts == ["one", "two", "three"]
    # Redis lost events (a restart without persistence): the reader trusts Redis.
    await fake_redis.ltrim(KEYS.events("s1"), 0, 0)
    assert len((await reader.get("s1")).events) == 1


async def test_appends_interleaved_with_another_replica_are_read_back_whole_and_in_order(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    one, two = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    session = await one.create("app", "ann", "s1")
    await one.append(session, text_event("a"))  # cached by `one` as written
    await two.append(await two.get("s1"), text_event("b"))
    await one.append(session, text_event("c"))  # `one` missed "b": it must not trust its cache
    texts = [e.content.parts[0].text for e in (await one.get("s1")).events]  # type: ignore[union-attr, index]
    assert texts == ["a", "b", "c"]


async def test_a_session_lease_excludes_other_holders_until_released(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    leases = Leases(fake_redis, KEYS, "replica", ttl_s=5)
    await store.create("app", "ann", "s1")
    await leases.acquire("s1", "replica-a/1")
    with pytest.raises(SessionBusyError, match="being run by another orchestrator"):
        await leases.acquire("s1", "replica-b/1")
    await leases.release("s1", "replica-b/1")  # not the holder: nothing happens
    with pytest.raises(SessionBusyError):
        await leases.acquire("s1", "replica-b/1")
    assert await leases.unleased(["s1", "s2"]) == ["s2"]
    await leases.release("s1", "replica-a/1")
    await leases.acquire("s1", "replica-b/1")


def claim(session_id: str, owner: str) -> LeaseClaim:
    return LeaseClaim(session_id, KEYS.lease(session_id), owner, 5)


async def test_reading_a_session_can_take_its_lease_in_the_same_round_trip(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    await store.create("app", "ann", "s1")
    await store.get("s1", lease=claim("s1", "replica-a/1"))
    assert await fake_redis.get(KEYS.lease("s1")) == b"replica-a/1"
    await store.get("s1", lease=claim("s1", "replica-a/1"))  # its own: fine
    busy = r"being run by another orchestrator \(replica-a/1\)"
    with pytest.raises(SessionBusyError, match=busy):
        await store.get("s1", lease=claim("s1", "replica-b/1"))
    # A session that does not exist is created, then read under the lease.
    created = await store.get_or_create("app", "bob", "s2", lease=claim("s2", "replica-b/1"))
    assert created.user_id == "bob"
    assert await fake_redis.get(KEYS.lease("s2")) == b"replica-b/1"
