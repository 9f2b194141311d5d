"""The orchestrator's auto-pipelined Redis client, on a real Redis: every caller gets its
own replies, transactions stay whole, errors keep redis-py's classes, and a broken or
blocked connection loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from tests.support import until
from toolfleet.orchestrator.autopipeline import AutoPipelinedRedis
from toolfleet.orchestrator.connections import command_client
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.keys import Keys
from toolfleet.shared.outages import async_retry_policy


@pytest.fixture
def name() -> str:
    return f"tfap-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def client(redis_url: str, name: str) -> AsyncIterator[aioredis.Redis]:
    pool = aioredis.ConnectionPool.from_url(redis_url, client_name=f"{name}-pool")
    client = AutoPipelinedRedis.over(pool, redis_url, async_retry_policy(), name=name)
    yield client
    await client.aclose()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    prefix = f"tfap-{uuid.uuid4().hex[:8]}"
    yield prefix
    sync = redis.Redis.from_url(redis_url)
    for key in sync.scan_iter(f"{prefix}:*"):
        sync.delete(key)
    sync.close()


def _connections(redis_url: str, name: str) -> int:
    sync = redis.Redis.from_url(redis_url)
    try:
        return sum(c.get("name") == name for c in sync.client_list())
    finally:
        sync.close()


def _kill(redis_url: str, name: str) -> int:
    """Kill the client's connections by name (CLIENT KILL, as a failover or a proxy would)."""
    sync = redis.Redis.from_url(redis_url)
    try:
        return sum(
            int(sync.client_kill_filter(_id=c["id"]))
            for c in sync.client_list()
            if c.get("name") == name
        )
    finally:
        sync.close()


async def test_concurrent_callers_share_one_connection_and_get_their_own_replies(
    client: aioredis.Redis, prefix: str, redis_url: str, name: str
) -> None:
    async def caller(i: int) -> tuple[int, list[object]]:
        pipe = client.pipeline(transaction=False)
        pipe.set(f"{prefix}:k{i}", f"v{i}" * (i % 7 + 1))
        pipe.get(f"{prefix}:k{i}")
        pipe.hset(f"{prefix}:h{i}", mapping={"n": i})
        pipe.hgetall(f"{prefix}:h{i}")
        return await client.incr(f"{prefix}:n"), await pipe.execute()

    results = await asyncio.gather(*(caller(i) for i in range(300)))

    counts = sorted(count for count, _ in results)
    assert counts == list(range(1, 301))  # every INCR answered once, to its caller
    for i, (_, replies) in enumerate(results):
        assert replies == [True, f"v{i}".encode() * (i % 7 + 1), 1, {b"n": str(i).encode()}]
    assert _connections(redis_url, name) == 1
    assert _connections(redis_url, f"{name}-pool") == 0  # nothing took a pooled connection


async def test_transactions_of_concurrent_callers_are_not_interleaved(
    client: aioredis.Redis, prefix: str
) -> None:
    async def transfer(i: int) -> list[object]:
        pipe = client.pipeline(transaction=True)
        pipe.rpush(f"{prefix}:log", f"start {i}")
        pipe.rpush(f"{prefix}:log", f"end {i}")
        return await pipe.execute()

    await asyncio.gather(*(transfer(i) for i in range(100)))

    log = [entry.decode() for entry in await client.lrange(f"{prefix}:log", 0, -1)]
    assert len(log) == 200
    for start, end in zip(log[::2], log[1::2], strict=True):
        assert start.split()[1] == end.split()[1], (start, end)


async def test_errors_keep_redis_pys_classes_and_places(
    client: aioredis.Redis, prefix: str
) -> None:
    with pytest.raises(NoScriptError):
        await client.evalsha("0" * 40, 0)

    await client.set(f"{prefix}:s", "text")
    pipe = client.pipeline(transaction=False)
    pipe.lpush(f"{prefix}:s", 1)  # WRONGTYPE
    pipe.evalsha("0" * 40, 0)
    pipe.get(f"{prefix}:s")
    wrong, noscript, value = await pipe.execute(raise_on_error=False)
    assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
    assert isinstance(noscript, NoScriptError)
    assert value == b"text"

    pipe = client.pipeline(transaction=True)
    pipe.lpush(f"{prefix}:s", 1)
    pipe.get(f"{prefix}:s")
    with pytest.raises(ResponseError, match="Command # 1"):
        await pipe.execute()

    pipe = client.pipeline(transaction=True)
    pipe.set(f"{prefix}:t", 1)
    pipe.execute_command("NO-SUCH-COMMAND")
    with pytest.raises(ResponseError, match="unknown command"):
        await pipe.execute()  # EXECABORT: nothing of it ran
    assert await client.get(f"{prefix}:t") is None
    assert await client.get(f"{prefix}:s") == b"text"  # the connection still in step


async def test_a_cancelled_caller_does_not_shift_the_replies_of_the_next(
    client: aioredis.Redis, prefix: str
) -> None:
    await client.set(f"{prefix}:a", "a")
    waiting = asyncio.create_task(client.incr(f"{prefix}:n"))
    await asyncio.sleep(0)  # ok: one loop iteration (queued)
    await asyncio.sleep(0)  # ok: one more (written)
    waiting.cancel()
    assert await client.get(f"{prefix}:a") == b"a"
    assert await client.incr(f"{prefix}:n") == 2  # the cancelled INCR ran; its reply was dropped


async def test_a_killed_connection_is_reopened_and_its_commands_retried(
    client: aioredis.Redis, prefix: str, redis_url: str, name: str
) -> None:
    await client.set(f"{prefix}:a", "a")
    assert _kill(redis_url, name) == 1  # the one shared connection
    values = await asyncio.gather(*(client.get(f"{prefix}:a") for _ in range(50)))
    assert values == [b"a"] * 50


async def test_blocking_commands_take_a_pooled_connection(
    client: aioredis.Redis, prefix: str, redis_url: str, name: str
) -> None:
    await client.ping()  # the shared connection is open: a BLPOP sent on it goes first
    popped = asyncio.create_task(client.blpop([f"{prefix}:q"], timeout=30))
    await asyncio.sleep(0)  # ok: one loop iteration, the BLPOP on its way first
    # The shared connection is not stuck behind the BLPOP.
    assert await client.incr(f"{prefix}:n") == 1
    assert not popped.done()
    await client.rpush(f"{prefix}:q", "x")
    assert await asyncio.wait_for(popped, 10) == (f"{prefix}:q".encode(), b"x")
    assert _connections(redis_url, f"{name}-pool") == 1


async def test_the_urls_database_is_selected(
    client: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    await client.set(f"{prefix}:db", "here")
    sync = redis.Redis.from_url(redis_url)  # the same database, by redis-py
    try:
        assert sync.get(f"{prefix}:db") == b"here"
    finally:
        sync.close()


async def test_bad_arguments_fail_before_anything_is_sent(
    client: aioredis.Redis, prefix: str
) -> None:
    with pytest.raises(redis.DataError, match="SET"):
        await client.execute_command("SET", f"{prefix}:x", None)
    assert await client.set(f"{prefix}:x", bytearray(b"ok")) is True
    assert await client.get(f"{prefix}:x") == b"ok"


async def test_callers_cancelled_while_the_connection_opens_leave_no_socket_open(
    redis_url: str, name: str
) -> None:
    """The result reader is stopped (cancelled) whenever its replica stops, maybe in the
    middle of opening its connection: each step of the opening is tried here."""
    for steps in range(12):
        client = AutoPipelinedRedis.over(
            aioredis.ConnectionPool.from_url(redis_url), redis_url, async_retry_policy(), name=name
        )
        caller = asyncio.create_task(client.ping())
        for _ in range(steps):
            await asyncio.sleep(0)  # ok: one loop iteration per step of the opening
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        await client.aclose()
        del client, caller
        gc.collect()  # an unclosed socket would warn here (warnings are errors in the tests)
    await until(lambda: _connections(redis_url, name) == 0, "every connection closed", 5)


@pytest.mark.parametrize("autopipeline", [True, False])
async def test_a_session_read_gets_the_same_session_through_either_client(
    redis_url: str, prefix: str, autopipeline: bool
) -> None:
    """The read sends its commands without redis-py's response callbacks on the
    auto-pipelined connection, with them on a pooled one: the session is the same."""
    keys = Keys(prefix)
    client = command_client(redis_url, autopipeline=autopipeline)
    try:
        assert isinstance(client, AutoPipelinedRedis) is autopipeline
        store = SessionStore(client, keys)
        session = await store.create("app", "ann", "s1")
        state = {"color": "red", "user:name": "Ann", "app:motd": {"hi": [1, 2]}}
        await store.append(session, Event(invocation_id="i", author="user", state_delta=state))
        leases = Leases(client, keys, "replica-a", ttl_s=5)
        claim = leases.claim(session.key)
        fresh = SessionStore(client, keys)  # nothing cached: the read's every command
        read = await fresh.get(session.key, lease=claim)
        again = await fresh.get(session.key)  # cached: only what is new (nothing)
        assert read.state == again.state == state
        assert [e.state_delta for e in read.events] == [state]
        assert [e.state_delta for e in again.events] == [state]
        assert await client.get(keys.lease(session.key)) == claim.owner.encode()  # the lease taken
    finally:
        await client.aclose()
