"""ResultWaiter: one XREAD for many calls; malformed and late entries harm nothing."""

from __future__ import annotations

import asyncio
import logging
import time

import fakeredis
import pytest

from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner, new_fleet_key

KEYS = Keys("t")


def result(call_id: str, session: str = "s1") -> ToolResult:
    now = time.time()
    return ToolResult(
        call_id=call_id, tool="t", session_id=session, invocation_id="i", status=CallStatus.SUCCESS,
        response={"n": call_id}, started_at=now, finished_at=now,
    )  # fmt: skip


async def post(client: fakeredis.FakeAsyncRedis, stream: str, r: ToolResult) -> None:
    await client.xadd(stream, {RESULT_FIELD: r.model_dump_json()})


@pytest.fixture
async def waiter(fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis):  # type: ignore[no-untyped-def]
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    # fakeredis never wakes a blocked XREAD for another client's XADD, so read in short
    # blocks here; the integration tests cover the real blocking read.
    w = ResultWaiter(reader, fake_redis, KEYS, "replica-1", block_ms=20)
    await w.start()
    yield w
    await w.stop()
    await reader.aclose()


async def test_results_on_several_streams_resolve_their_own_futures(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    a = await waiter.expect(KEYS.results("s1"), ["a1", "a2"])
    b = await waiter.expect(KEYS.results("s2"), ["b1"])
    await post(fake_redis, KEYS.results("s2"), result("b1", "s2"))
    await post(fake_redis, KEYS.results("s1"), result("a2"))
    await post(fake_redis, KEYS.results("s1"), result("a1"))
    got = await asyncio.wait_for(asyncio.gather(a["a1"], a["a2"], b["b1"]), timeout=5)
    assert [r.call_id for r in got] == ["a1", "a2", "b1"]


async def test_malformed_entry_is_logged_and_skipped(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis, caplog: pytest.LogCaptureFixture
) -> None:
    stream = KEYS.results("s1")
    futures = await waiter.expect(stream, ["c1"])
    with caplog.at_level(logging.ERROR):
        await fake_redis.xadd(stream, {RESULT_FIELD: '{"call_id": "c1", "status": "hacked"}'})
        await fake_redis.xadd(stream, {"garbage": "x"})
        await post(fake_redis, stream, result("c1"))
        got = await asyncio.wait_for(futures["c1"], timeout=5)
    assert got.response == {"n": "c1"}
    assert caplog.text.count("rejected a malformed entry") == 2


async def test_late_or_duplicate_result_is_delivered_once(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    stream = KEYS.results("s1")
    first = await waiter.expect(stream, ["c1", "c2"])
    await post(fake_redis, stream, result("c1"))
    await post(fake_redis, stream, result("c1"))  # a redelivered task reporting twice
    await post(fake_redis, stream, result("c2"))
    assert (await asyncio.wait_for(first["c2"], 5)).call_id == "c2"
    assert first["c1"].result().call_id == "c1"
    # Waiting again for c1 sees nothing more: its results were consumed and settled.
    await waiter.settle(stream)
    assert await fake_redis.xlen(stream) == 0


async def test_settle_keeps_results_not_yet_delivered(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    stream = KEYS.results("s1")
    futures = await waiter.expect(stream, ["c1"])
    await post(fake_redis, stream, result("c1"))
    await asyncio.wait_for(futures["c1"], 5)
    await post(fake_redis, stream, result("c9"))  # arrives after, for a call not awaited yet
    await waiter.settle(stream)
    entries = await fake_redis.xrange(stream)
    assert len(entries) == 1 and b'"c9"' in entries[0][1][RESULT_FIELD.encode()]


async def test_with_the_fleet_key_only_results_the_workers_signed_are_accepted(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Given a client that may write the results stream but has no fleet key, when it
    posts a well-formed result for the awaited call (unsigned, or signed with another
    key), it is rejected and the call waits for the one a worker signed."""
    signer = ResultSigner(new_fleet_key())
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    signed_waiter = ResultWaiter(reader, fake_redis, KEYS, "replica-2", block_ms=20, signer=signer)
    await signed_waiter.start()
    try:
        stream = KEYS.results("s1")
        futures = await signed_waiter.expect(stream, ["c1"], session_id="s1", tools={"c1": "t"})
        forged = result("c1").model_copy(update={"response": {"n": "forged"}})
        with caplog.at_level(logging.ERROR):
            await post(fake_redis, stream, forged)  # no signature
            payload = forged.model_dump_json().encode()
            other = ResultSigner(new_fleet_key()).sign(payload)
            await fake_redis.xadd(stream, {RESULT_FIELD: payload, SIGNATURE_FIELD: other})
            reporter = ResultReporter(fakeredis.FakeRedis(server=fake_server), 100, signer)
            reporter.post(stream, result("c1"))  # what a worker with the key posts
            got = await asyncio.wait_for(futures["c1"], timeout=5)
        assert got.response == {"n": "c1"}
        assert caplog.text.count("no valid fleet-key signature") == 2
    finally:
        await signed_waiter.stop()
        await reader.aclose()
