"""A worker's node name is held by one live worker: claimed at start, renewed by its
heartbeat, freed on a clean stop or when its holder dies."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from types import SimpleNamespace

import fakeredis
import pytest

from toolfleet.orchestrator.fleet import pools
from toolfleet.orchestrator.fleet.pools import live_workers
from toolfleet.shared.keys import Keys
from toolfleet.workers import names
from toolfleet.workers.heartbeat import Heartbeat
from toolfleet.workers.names import NameClaim, WorkerNameTakenError, default_worker_name

KEYS = Keys("t")


@pytest.fixture
def client(fake_server: fakeredis.FakeServer) -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis(server=fake_server)


def test_default_names_differ_by_process_and_keep_celerys_form() -> None:
    name = default_worker_name(["default", "io"])
    assert name.startswith(f"default-io.{os.getpid()}@")
    assert default_worker_name(["default"], pid=7) != default_worker_name(["default"], pid=8)
    # Celery splits a node name at its first "@" and expands "%" placeholders.
    assert default_worker_name(["a@b", "c%h"], 1, "host") == "a_b-c_h.1@host"


def test_a_live_holders_name_is_refused_with_what_to_change(
    client: fakeredis.FakeRedis,
) -> None:
    NameClaim(client, KEYS, "w@h", 1500).take()

    with pytest.raises(WorkerNameTakenError) as refused:
        NameClaim(client, KEYS, "w@h", 1500).take()

    message = str(refused.value)
    assert "w@h is held by a live worker" in message
    assert f"pid {os.getpid()}" in message and "--name" in message


def test_a_dead_holders_name_is_free_once_its_claim_expires(
    client: fakeredis.FakeRedis,
) -> None:
    dead = NameClaim(client, KEYS, "w@h", 1500)
    dead.take()
    client.delete(KEYS.worker_name("w@h"))  # expired: three beats missed

    heir = NameClaim(client, KEYS, "w@h", 1500)
    heir.take()

    assert heir.renew("{}") and not dead.renew("{}")


async def test_a_worker_that_lost_its_name_neither_beats_over_nor_removes_the_holder(
    fake_server: fakeredis.FakeServer,
    client: fakeredis.FakeRedis,
    fake_redis: fakeredis.FakeAsyncRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stalled = Heartbeat(client, KEYS, period_s=60)
    stalled.start("w@h", ["default"])
    client.delete(KEYS.worker_name("w@h"))  # its claim lapsed while it missed its beats
    holder = Heartbeat(client, KEYS, period_s=60)
    holder.start("w@h", ["io"])

    with caplog.at_level(logging.ERROR):
        stalled._beat()  # the thread's next beat
    stalled.stop()

    assert re.search(r"w@h was taken by another worker .* --name", caplog.text)
    (worker,) = await live_workers(fake_redis, KEYS)
    assert worker.pools == ["io"]
    holder.stop()
    assert await live_workers(fake_redis, KEYS) == []
    assert not client.exists(KEYS.worker_name("w@h"))


async def test_two_workers_on_one_host_are_both_live(
    client: fakeredis.FakeRedis, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    first, second = (Heartbeat(client, KEYS, period_s=60) for _ in range(2))
    first.start(default_worker_name(["default"], pid=11), ["default"])
    second.start(default_worker_name(["default"], pid=12), ["default"])

    workers = await live_workers(fake_redis, KEYS)

    assert [w.hostname.partition("@")[0] for w in workers] == ["default.11", "default.12"]
    first.stop()
    second.stop()


def test_the_claim_names_its_holder_and_expires_with_the_heartbeat(
    client: fakeredis.FakeRedis,
) -> None:
    heartbeat = Heartbeat(client, KEYS, period_s=2)
    heartbeat.claim("w@h")
    try:
        held = json.loads(client.get(KEYS.worker_name("w@h")) or "{}")
        assert held["pid"] == os.getpid()
        assert 0 < client.pttl(KEYS.worker_name("w@h")) <= 6000  # three periods
        assert not client.exists(KEYS.worker("w@h"))  # not live before it is ready
    finally:
        heartbeat.stop()
    assert not client.exists(KEYS.worker_name("w@h"))


def test_a_beat_before_the_worker_is_ready_keeps_the_name_and_publishes_no_record(
    client: fakeredis.FakeRedis,
) -> None:
    # A worker claims its name while Celery still builds it; a slow start lets beats
    # come first, and they must not list it as a live worker of no pool.
    heartbeat = Heartbeat(client, KEYS, period_s=60)
    heartbeat.claim("w@h")
    try:
        client.pexpire(KEYS.worker_name("w@h"), 10)
        heartbeat._beat()  # what the beat thread does, here before `start`
        assert client.pttl(KEYS.worker_name("w@h")) > 10  # the name is renewed
        assert not client.exists(KEYS.worker("w@h"))
        assert client.zcard(KEYS.workers()) == 0
        heartbeat.start("w@h", ["default"])
        assert json.loads(client.get(KEYS.worker("w@h")) or "{}")["pools"] == ["default"]
    finally:
        heartbeat.stop()


def test_a_stop_during_a_beat_leaves_neither_the_name_nor_the_record(
    client: fakeredis.FakeRedis,
) -> None:
    # Beats as fast as they go, so that stops land in the middle of one: a beat still in
    # flight after the release would write both back, for three periods.
    held = []
    for i in range(200):
        heartbeat = Heartbeat(client, KEYS, period_s=0.0005)
        heartbeat.start(f"w{i}@h", ["default"])
        heartbeat.stop()
        keys = (KEYS.worker_name(f"w{i}@h"), KEYS.worker(f"w{i}@h"))
        held += [k for k in keys if client.exists(k)]
    assert held == []


async def test_each_beat_carries_the_calls_running_and_a_failed_count_keeps_it_live(
    client: fakeredis.FakeRedis,
    fake_redis: fakeredis.FakeAsyncRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    running = [2]

    def busy() -> int:
        if running[0] < 0:
            raise RuntimeError("count broke")
        return running[0]

    beat = Heartbeat(client, KEYS, period_s=60)
    beat.start("w@h", ["default"], "prefork", 4, ["t"], ["app.tools"], busy, {"t": "default"})
    (worker,) = await live_workers(fake_redis, KEYS)
    assert (worker.busy, worker.modules, worker.tool_pools) == (2, ["app.tools"], {"t": "default"})
    running[0] = 0
    beat._beat()  # the thread's next beat
    assert [w.busy for w in await live_workers(fake_redis, KEYS)] == [0]
    running[0] = -1
    with caplog.at_level(logging.ERROR):
        beat._beat()
    assert "counting the calls this worker runs failed" in caplog.text
    (still,) = await live_workers(fake_redis, KEYS)
    assert (still.hostname, still.busy) == ("w@h", None)
    beat.stop()


@pytest.mark.parametrize(("worker_off_s", "orchestrator_off_s"), [(-60, 0), (0, 60)])
async def test_a_live_worker_counts_whatever_the_hosts_clocks_say(
    client: fakeredis.FakeRedis,
    fake_redis: fakeredis.FakeAsyncRedis,
    monkeypatch: pytest.MonkeyPatch,
    worker_off_s: float,
    orchestrator_off_s: float,
) -> None:
    """The worker's host clock a minute slow, or the orchestrator's a minute fast: the
    worker beat a moment ago, so it is live (its lease is on Redis's clock, as the tool
    limits' are), and a call of its pool is not refused NoWorkerError."""
    real = time.time
    monkeypatch.setattr(names, "time", SimpleNamespace(time=lambda: real() + worker_off_s))
    skewed = SimpleNamespace(time=lambda: real() + orchestrator_off_s, monotonic=time.monotonic)
    monkeypatch.setattr(pools, "time", skewed)
    claim = NameClaim(client, KEYS, "w@h", 6000)
    claim.take()
    record = {"hostname": "w@h", "pools": ["default"], "pid": 1, "started_at": 0.0}
    assert claim.renew(json.dumps(record))

    assert [w.hostname for w in await live_workers(fake_redis, KEYS)] == ["w@h"]

    claim.release()
    assert await live_workers(fake_redis, KEYS) == []
