"""The fleet's gauges on /metrics follow the pools as the heartbeats show them now."""

from __future__ import annotations

import json
import time

import fakeredis

from toolfleet.orchestrator.fleet.gauges import refresh_fleet_gauges
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.metrics import metrics

KEYS = Keys("t")


def gauge(name: str, pool: str) -> float | None:
    return metrics().registry.get_sample_value(name, {"pool": pool})


async def test_a_pool_whose_last_worker_died_shows_no_live_worker(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A pool no agent of this orchestrator names (a job's, another app's) is exported
    while a worker serves it; once its last worker is gone it must not go on showing
    that worker and its slots - an alert on no live worker would never fire."""
    info = {"hostname": "w@h", "pools": ["jobs"], "pid": 1, "started_at": 0.0}
    await fake_redis.set(KEYS.worker("w@h"), json.dumps({**info, "concurrency": 4, "busy": 2}))
    await fake_redis.zadd(KEYS.workers(), {"w@h": time.time() + 30})
    await refresh_fleet_gauges(fake_redis, KEYS, ["default"])
    assert gauge("toolfleet_live_workers", "jobs") == 1
    assert gauge("toolfleet_worker_slots", "jobs") == 4

    await fake_redis.delete(KEYS.worker("w@h"))  # it died: its record lapsed
    await fake_redis.zadd(KEYS.workers(), {"w@h": time.time() - 1})
    await fake_redis.lpush(queue_name("jobs"), "{}")  # a call still waits for it
    await refresh_fleet_gauges(fake_redis, KEYS, ["default"])

    assert gauge("toolfleet_live_workers", "jobs") == 0
    assert gauge("toolfleet_worker_slots", "jobs") == 0
    assert gauge("toolfleet_worker_slots_busy", "jobs") == 0
    assert gauge("toolfleet_queue_depth", "jobs") == 1


async def test_a_forged_record_with_counts_past_a_float_does_not_fail_the_scrape(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A heartbeat record is JSON whoever can write Redis may forge: counts no gauge can
    hold (past a float's range), or a start time that is no time, are no record of a
    worker; the scrape goes on with the sound ones."""
    sound = {"hostname": "w@h", "pools": ["census"], "pid": 1, "started_at": 0.0}
    forged = [
        {**sound, "hostname": "f1@h", "concurrency": 10**400},
        {**sound, "hostname": "f2@h", "busy": 10**400},
        {**sound, "hostname": "f3@h", "busy": -3},
    ]
    for info in [{**sound, "concurrency": 4}, *forged]:
        await fake_redis.set(KEYS.worker(str(info["hostname"])), json.dumps(info))
        await fake_redis.zadd(KEYS.workers(), {str(info["hostname"]): time.time() + 30})
    await fake_redis.set(KEYS.worker("f4@h"), json.dumps(sound).replace("0.0", "NaN"))
    await fake_redis.zadd(KEYS.workers(), {"f4@h": time.time() + 30})

    await refresh_fleet_gauges(fake_redis, KEYS, [])

    assert gauge("toolfleet_live_workers", "census") == 1
    assert gauge("toolfleet_worker_slots", "census") == 4
