"""Live workers come from a registry the heartbeats keep, never from a keyspace scan."""

from __future__ import annotations

import json
import time

import fakeredis

from toolfleet.orchestrator.fleet.pools import live_workers
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
