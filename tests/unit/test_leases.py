"""Session leases on fakeredis: fenced writes, and a renewal that fails."""

from __future__ import annotations

import asyncio
import dataclasses

import fakeredis
import pytest
import redis.asyncio as aioredis
from google.genai import types

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.fencing import _FENCED, record_ttl_s
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.outages import APPLIED_TTL_S

KEYS = Keys("t")
S1 = session_key("app", "ann", "s1")


def user_event(text: str) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(invocation_id="i", author="user", content=content)


async def test_a_write_fenced_by_a_lost_lease_is_refused_and_changes_nothing(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """Given a writer whose lease was taken over, when it appends, Redis refuses it."""
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    session = await store.create("app", "ann", "s1")
    async with leases.hold(S1) as hold:
        await store.append(session, user_event("mine"), fence=hold.fence)
        await fake_redis.set(KEYS.lease(S1), "replica-b/1")  # expired, and taken
        with pytest.raises(LeaseLostError, match="lost the session's lease"):
            await store.append(session, user_event("late"), owes_turn=True, fence=hold.fence)
    fresh = SessionStore(fake_redis, KEYS)
    assert [e.content.parts[0].text for e in (await fresh.get(S1)).events] == ["mine"]  # type: ignore[union-attr, index]
    assert await fresh.sessions_to_resume() == []
    assert await fake_redis.get(KEYS.lease(S1)) == b"replica-b/1"  # not released by a->b


async def test_a_fenced_write_sent_twice_applies_once_and_answers_alike(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """The same write (same record key) arriving again - its first reply was lost - gets
    the first arrival's replies and applies nothing, even after it released the lease;
    its record expires after the TTL it was given."""
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    token = leases.token()
    await leases.acquire(S1, token)
    batch = WriteBatch()
    batch.rpush("t:list", "a")
    batch.set("t:flag", "1")
    batch.delete("t:missing")
    keys = (KEYS.lease(S1), f"{KEYS.applied_writes(S1)}:w1")
    args = (token, "1", APPLIED_TTL_S, *batch.flat())  # release with the write
    first = await _FENCED.run(fake_redis, 2, *keys, *args)
    again = await _FENCED.run(fake_redis, 2, *keys, *args)
    assert first == again == [1, b"OK", 0]
    assert await fake_redis.lrange("t:list", 0, -1) == [b"a"]
    assert await fake_redis.get(KEYS.lease(S1)) is None
    assert 0 < await fake_redis.ttl(keys[1]) <= APPLIED_TTL_S
    other = (KEYS.lease(S1), f"{KEYS.applied_writes(S1)}:w2")  # a new write is fenced
    with pytest.raises(aioredis.ResponseError, match="LEASELOST"):
        await _FENCED.run(fake_redis, 2, *other, *args)


class FlakyLeases(Leases):
    """Leases whose renewals fail `failures` times (Redis away), then work as usual."""

    def __init__(self, client: aioredis.Redis, failures: int, ttl_s: float) -> None:
        super().__init__(client, KEYS, "replica-a", ttl_s)
        self.failures = failures
        self.attempts = 0
        self.three_attempts = asyncio.Event()

    async def renew(self, session_id: SessionKey, owner: str) -> bool:
        self.attempts += 1
        if self.attempts == 3:
            self.three_attempts.set()
        if self.attempts <= self.failures:
            raise aioredis.ConnectionError("Redis is away")
        return await super().renew(session_id, owner)


async def test_a_renewal_that_fails_once_is_retried_within_the_ttl(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    leases = FlakyLeases(fake_redis, failures=1, ttl_s=0.6)
    async with leases.hold(S1) as hold:
        await asyncio.wait_for(leases.three_attempts.wait(), 5)  # two after the failed one
        assert not hold.renewal.lost
        assert await fake_redis.get(KEYS.lease(S1)) == hold.fence.token.encode()


async def test_a_renewal_that_keeps_failing_loses_the_lease_before_it_expires(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    leases = FlakyLeases(fake_redis, failures=1_000, ttl_s=0.6)
    async with leases.hold(S1) as hold:
        await asyncio.wait_for(hold.renewal.lost_event.wait(), 5)
        assert 1 < leases.attempts < 1_000  # retried, then gave up


async def test_a_renewal_never_takes_back_a_lease_another_holder_took(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=0.6)
    async with leases.hold(S1) as hold:
        await fake_redis.set(KEYS.lease(S1), "replica-b/1")
        await asyncio.wait_for(hold.renewal.lost_event.wait(), 5)
    assert await fake_redis.get(KEYS.lease(S1)) == b"replica-b/1"


def test_a_write_is_remembered_for_a_minute_or_twice_its_lease_if_longer() -> None:
    """Past its record, a copy of a fenced write must find its lease lapsed."""
    assert record_ttl_s(30) == APPLIED_TTL_S == 60
    assert record_ttl_s(45.5) == 91
    assert (
        Leases(fakeredis.FakeAsyncRedis(), KEYS, "r", ttl_s=300).fence(S1, "t").record_ttl_s == 600
    )


async def test_a_lease_taken_by_a_read_retried_for_long_is_renewed_on_the_leases_clock(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a session read that took the lease and was then retried past a third of its
    TTL (lost replies, a reconnect), when the lease is held, then it is renewed at once,
    not a third of the TTL after the read returned - by then it may have expired."""
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=30)
    claim = leases.claim(S1)
    await store.create("app", "ann", "s1")
    await store.get(S1, lease=claim)
    # As if the read had been sent 12 s ago (renewals are due every 10 s).
    claim = dataclasses.replace(claim, claimed_at=claim.claimed_at - 12)
    renewed = asyncio.Event()
    original = Leases.renew

    async def renew(self: Leases, session_id: SessionKey, owner: str) -> bool:
        held = await original(self, session_id, owner)
        renewed.set()
        return held

    monkeypatch.setattr(Leases, "renew", renew)
    async with leases.hold(S1, claimed=claim) as hold:
        await asyncio.wait_for(renewed.wait(), 5)
        assert not hold.renewal.lost
    assert await fake_redis.get(KEYS.lease(S1)) is None  # released
