"""Live workers come from a registry the heartbeats keep, never from a keyspace scan."""

from __future__ import annotations

import json
import time

import fakeredis

from toolfleet.orchestrator.fleet.pools import LivePools, live_workers
from toolfleet.shared.keys import Keys

KEYS = Keys("t")


async def beat(client: fakeredis.FakeAsyncRedis, hostname: str, expires_in_s: float) -> None:
    info = {"hostname": hostname, "pools": [hostname.split("@")[0]], "pid": 1, "started_at": 0.0}
    await client.set(KEYS.worker(hostname), json.dumps(info))
    await client.zadd(KEYS.workers(), {hostname: time.time() + expires_in_s})


async def test_live_workers_are_those_with_a_current_heartbeat(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    await beat(fake_redis, "default@a", 30)
    await beat(fake_redis, "heavy@b", -1)  # died without removing its entry
    await fake_redis.set(KEYS.worker("other@c"), "{}")  # a key alone is not registered

    workers = await live_workers(fake_redis, KEYS)

    assert [w.hostname for w in workers] == ["default@a"]
    assert await fake_redis.zrange(KEYS.workers(), 0, -1) == [b"default@a"]  # pruned


async def test_a_pools_tools_are_those_its_live_workers_registered(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Together over the pool's workers; a pool one of whose workers does not say (an
    older worker) is taken to run any tool."""
    for hostname, its_pools, tools in [
        ("a@h", ["default"], ["nap"]),
        ("b@h", ["default", "heavy"], ["render"]),
        ("c@h", ["old"], None),
        ("d@h", ["old"], []),
    ]:
        info: dict[str, object] = {"hostname": hostname, "pools": its_pools, "pid": 1}
        info["started_at"] = 0.0
        if tools is not None:
            info["tools"] = tools
        await fake_redis.set(KEYS.worker(hostname), json.dumps(info))
        await fake_redis.zadd(KEYS.workers(), {hostname: time.time() + 30})
    pools = LivePools(fake_redis, KEYS)

    assert await pools.served() == {"default", "heavy", "old"}
    assert pools.registered("default", "nap") and pools.registered("default", "render")
    assert pools.registered("heavy", "render") and not pools.registered("heavy", "nap")
    assert not pools.registered("default", "fetch")
    assert pools.registered("old", "anything")


async def lapse(client: fakeredis.FakeAsyncRedis, hostname: str) -> None:
    """The worker's record expired: it could not beat (Redis away), or it died."""
    await client.delete(KEYS.worker(hostname))
    await client.zadd(KEYS.workers(), {hostname: time.time() - 1})


async def test_a_pool_served_before_a_redis_outage_stays_served_for_a_grace_after_it(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Its workers could not beat while Redis was away: their records lapsed, and come
    back with their next beats. Until then, or the grace's end, the pool counts as served,
    with the tools its workers had."""
    info = {"hostname": "io@a", "pools": ["io"], "pid": 1, "started_at": 0.0, "tools": ["fetch"]}
    await fake_redis.set(KEYS.worker("io@a"), json.dumps(info))
    await fake_redis.zadd(KEYS.workers(), {"io@a": time.time() + 30})
    outage_at = [float("-inf")]
    pools = LivePools(fake_redis, KEYS, outage_grace_s=5, outage_at=lambda: outage_at[0])
    assert await pools.served() == {"io"}

    await lapse(fake_redis, "io@a")
    outage_at[0] = time.monotonic()  # Redis was away until now
    pools.forget()
    assert await pools.served() == {"io"}
    assert pools.registered("io", "fetch") and not pools.registered("io", "other")

    outage_at[0] = time.monotonic() - 5  # the grace is over
    pools.forget()
    assert await pools.served() == frozenset()


async def test_a_pool_found_unserved_before_an_outage_is_not_served_after_it(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A read with Redis up found its workers gone (stopped, or dead): an outage later
    does not bring the pool back."""
    await beat(fake_redis, "io@a", 30)
    outage_at = [float("-inf")]
    pools = LivePools(fake_redis, KEYS, outage_grace_s=5, outage_at=lambda: outage_at[0])
    assert await pools.served() == {"io"}
    await lapse(fake_redis, "io@a")
    pools.forget()
    assert await pools.served() == frozenset()

    outage_at[0] = time.monotonic()
    pools.forget()
    assert await pools.served() == frozenset()


async def test_a_malformed_or_forged_record_is_skipped_not_fatal(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Whoever can write Redis can leave anything under a worker's key: the orchestrator's
    dispatch, `toolfleet status` and /metrics all read them, and each must go on with the
    workers whose records are sound."""
    await beat(fake_redis, "default@a", 30)
    junk = {
        "junk@b": "not json",
        "null@c": "null",
        "list@d": "[1, 2]",
        "missing@e": json.dumps({"hostname": "missing@e"}),
        "typed@f": json.dumps({"hostname": "t", "pools": "io", "pid": 1, "started_at": 0}),
        "deep@g": "[" * 100_000 + "]" * 100_000,
        "bytes@h": b"\xff\xfe",
    }
    for hostname, value in junk.items():
        await fake_redis.set(KEYS.worker(hostname), value)
        await fake_redis.zadd(KEYS.workers(), {hostname: time.time() + 30})

    await fake_redis.zadd(KEYS.workers(), {b"\xff@i": time.time() + 30})

    workers = await live_workers(fake_redis, KEYS)

    assert [w.hostname for w in workers] == ["default@a"]
    pools = LivePools(fake_redis, KEYS)
    assert await pools.served() == {"default"}
