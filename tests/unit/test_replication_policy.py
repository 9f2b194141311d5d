"""Writes wait for replicas only when some are asked for: with none (a single Redis), a
post is its script alone, with no barrier write or WAIT beside it."""

from __future__ import annotations

import fakeredis

from tests.support import tool_call
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, PendingCall, answered_result
from toolfleet.shared.replication import Replication
from toolfleet.shared.reporting import Post, ResultReporter
from toolfleet.shared.scripts import LuaScript

KEYS = Keys("t")
BARRIER = "t:replicated"
STREAM = "t:results:s"


def test_without_replicas_a_batch_of_posts_writes_no_barrier() -> None:
    client = fakeredis.FakeRedis()
    reporter = ResultReporter(client, 100, replication=Replication(0, 100, BARRIER))
    results = [
        answered_result(tool_call(f"c{i}", "t", "s", STREAM), CallStatus.SUCCESS, {}, worker="w")
        for i in range(3)
    ]
    ids = reporter.post_all([Post(STREAM, r) for r in results])
    assert all(isinstance(i, str) for i in ids) and client.xlen(STREAM) == 3
    assert client.exists(BARRIER) == 0


def test_without_replicas_a_posted_completion_writes_no_barrier() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS, replication=Replication(0, 100, BARRIER))
    assert completions.register(PendingCall.starting(tool_call("c1", "t", "s", STREAM)))
    completions.post_result("c1", {"status": "done"})
    assert client.xlen(KEYS.completions("app")) == 1
    assert client.exists(BARRIER) == 0


async def test_without_replicas_an_async_write_writes_no_barrier() -> None:
    client = fakeredis.FakeAsyncRedis()
    script = LuaScript("return redis.call('SET', KEYS[1], ARGV[1])")
    await Replication(0, 100, BARRIER).run(client, script, 1, "t:k", "v")
    await Replication(0, 100, BARRIER).wait(client)
    assert await client.get("t:k") == b"v"
    assert await client.exists(BARRIER) == 0
    await client.aclose()
