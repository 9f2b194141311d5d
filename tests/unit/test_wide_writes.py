"""Fenced writes of a turn wider than Lua unpacks at once (about 8,000 values), on
fakeredis' Lua, which has the same limit as Redis'."""

from __future__ import annotations

import time

import fakeredis
import pytest
from redis.exceptions import ResponseError

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.sessions.fencing import PART_WORDS, apply_once
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import ToolCall

KEYS = Keys("t")
S1 = session_key("app", "ann", "s1")
WIDE = 10_001  # calls of one turn: more words in one SADD than Lua unpacks
PLAIN = CeleryPublisher(None)  # type: ignore[arg-type]  # prepares messages only: no client


def calls(n: int) -> list[Dispatch]:
    return [
        PLAIN.dispatch(ToolCall(
            call_id=f"c{i}", tool="echo", args={"n": i}, session_id="s1", app_name="app",
            user_id="ann", invocation_id="i", agent="a", state={}, reply_to="r",
            dispatched_at=time.time(),
        ), "tools.default")
        for i in range(n)
    ]  # fmt: skip


async def test_a_fenced_turn_of_ten_thousand_calls_is_published_whole(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    token = leases.token()
    await leases.acquire(S1, token)
    publisher = CeleryPublisher(fake_redis)
    await publisher.publish(calls(WIDE), record_in="t:sent", fence=leases.fence(S1, token))
    assert await fake_redis.llen("tools.default") == WIDE
    assert await fake_redis.scard("t:sent") == WIDE
    assert await fake_redis.ttl("t:sent") > 0


async def test_a_wide_write_under_a_lost_lease_writes_no_part(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=5)
    token = leases.token()
    await leases.acquire(S1, token)
    await fake_redis.set(KEYS.lease(S1), "replica-b/1")  # expired, and taken
    publisher = CeleryPublisher(fake_redis)
    with pytest.raises(LeaseLostError):
        await publisher.publish(calls(WIDE), record_in="t:sent", fence=leases.fence(S1, token))
    assert await fake_redis.llen("tools.default") == 0
    assert await fake_redis.exists("t:sent") == 0


async def test_long_commands_run_in_parts_answer_as_one_command(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Counts add up over the parts; a push answers the list's final length; field/value
    and score/member pairs stay whole; the order of the values is kept."""
    ids = [f"c{i}" for i in range(WIDE)]
    batch = WriteBatch()
    batch.sadd("t:set", *ids)
    batch.hset("t:hash", mapping={i: f"v{i}" for i in ids})
    batch.rpush("t:list", *ids)
    batch.hdel("t:hash", *ids[:9_000])
    batch.delete(*(f"t:none{i}" for i in range(9_000)), "t:set")
    batch.zadd("t:zset", {i: n for n, i in enumerate(ids)})
    batch.zrem("t:zset", *ids[:9_000])
    replies = await apply_once(fake_redis, batch, "t:applied")
    assert replies == [WIDE, WIDE, WIDE, 9_000, 1, WIDE, 9_000]
    assert await fake_redis.lrange("t:list", 0, -1) == [i.encode() for i in ids]
    assert await fake_redis.hgetall("t:hash") == {i.encode(): f"v{i}".encode() for i in ids[9_000:]}
    scored = await fake_redis.zrange("t:zset", 0, -1, withscores=True)
    assert scored == [(i.encode(), float(n)) for n, i in enumerate(ids) if n >= 9_000]


async def test_a_long_command_that_cannot_run_in_parts_is_refused_before_any_write(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    batch = WriteBatch()
    batch.rpush("t:list", "first")
    batch.add("XADD", "t:stream", "*", *(["f", "v"] * PART_WORDS))
    with pytest.raises(ResponseError, match=r"XADD of .* words cannot run in parts"):
        await apply_once(fake_redis, batch, "t:applied")
    assert await fake_redis.exists("t:list", "t:stream") == 0
