"""The result reader batches its reads while many calls are awaited, and only then; only
after a read that let a session go on (answered the last call it awaited)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import fakeredis
import pytest

from tests.unit.test_results import KEYS, feed_reporter, read_once, result
from toolfleet.orchestrator.fleet import results as results_module
from toolfleet.orchestrator.fleet.read_batching import ReadBatching
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import RESULT_FIELD

S1 = session_key("app", "u", "s1")
S2 = session_key("app", "u", "s2")


class Gate:
    """A pause the test ends: it counts the pauses and holds each until `release`."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self.paused = asyncio.Event()
        self.released = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.paused.set()
        await self.released.wait()


class RecordedReads:
    """The call ids each XREAD of the reader returned on the results feed."""

    def __init__(self, reader: fakeredis.FakeAsyncRedis) -> None:
        self.calls: list[set[str]] = []
        original = reader.execute_command

        async def recording(*args: Any, **kwargs: Any) -> Any:
            response = await original(*args, **kwargs)
            if args[0] == "XREAD":
                self.calls.append(_feed_call_ids(response or []))
            return response

        reader.execute_command = recording  # type: ignore[method-assign]


def _feed_call_ids(response: list[Any]) -> set[str]:
    ids = set()
    for stream, entries in response:
        if stream.decode() == KEYS.results_feed():
            for _, fields in entries:
                ids.add(json.loads(fields[RESULT_FIELD.encode()])["call_id"])
    return ids


async def two_streams_read(waiter: ResultWaiter, server: fakeredis.FakeServer) -> tuple[str, str]:
    """The results streams of sessions S1 and S2, each read once by the reader (a call
    awaited at a time, answered there)."""
    streams = KEYS.results(S1), KEYS.results(S2)
    for stream in streams:
        await read_once(waiter, server, stream)
    return streams


@pytest.fixture
async def gated(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[ResultWaiter, Gate, RecordedReads]]:
    """A waiter that batches from 2 calls awaited, with a pause the test controls."""
    monkeypatch.setattr(results_module, "SWEEP_S", 600.0)  # reads name the feed only
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    reads = RecordedReads(reader)
    gate = Gate()
    batching = ReadBatching(pause_s=0.25, min_awaited=2, sleep=gate.sleep)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "replica-b", block_ms=20, batching=batching)
    await waiter.start()
    try:
        yield waiter, gate, reads
    finally:
        gate.released.set()
        await waiter.stop()
        await reader.aclose()


async def test_results_posted_during_the_pause_are_read_together(
    gated: tuple[ResultWaiter, Gate, RecordedReads], fake_server: fakeredis.FakeServer
) -> None:
    waiter, gate, reads = gated
    first, other = await two_streams_read(waiter, fake_server)  # one call at a time: no pause
    assert gate.pauses == []
    futures = await waiter.expect(first, ["c1"])
    futures |= await waiter.expect(other, ["c2", "c3"])
    post = feed_reporter(fake_server).post
    post(first, result("c1"))
    assert (await asyncio.wait_for(futures["c1"], 5)).call_id == "c1"
    # Its session goes on, and two calls are still awaited: it pauses.
    await asyncio.wait_for(gate.paused.wait(), 5)
    assert gate.pauses == [0.25]
    post(other, result("c2"))
    post(other, result("c3"))
    reads_before = len(reads.calls)
    gate.released.set()
    got = await asyncio.wait_for(asyncio.gather(futures["c2"], futures["c3"]), 5)
    assert [r.call_id for r in got] == ["c2", "c3"]
    # The first read after the pause brought both; none awaited after it: no more pauses.
    assert reads.calls[reads_before] == {"c2", "c3"}
    assert gate.pauses == [0.25]


async def test_a_wide_turns_results_are_read_as_they_come_until_its_last(
    gated: tuple[ResultWaiter, Gate, RecordedReads], fake_server: fakeredis.FakeServer
) -> None:
    waiter, gate, _ = gated
    wide, other = await two_streams_read(waiter, fake_server)
    futures = await waiter.expect(wide, ["c1", "c2", "c3"])
    futures |= await waiter.expect(other, ["d1", "d2"])
    post = feed_reporter(fake_server).post
    post(wide, result("c1"))
    assert (await asyncio.wait_for(futures["c1"], 5)).call_id == "c1"
    # The reader decides in the step that resolves the future: its session still
    # awaits two calls, so nothing went on and it reads on at once.
    assert gate.pauses == []
    post(wide, result("c2"))
    post(wide, result("c3"))
    await asyncio.wait_for(asyncio.gather(futures["c2"], futures["c3"]), 5)
    # Its last call answered, the session goes on; d1 and d2 are still awaited.
    await asyncio.wait_for(gate.paused.wait(), 5)
    assert gate.pauses == [0.25]


async def test_a_call_expected_again_is_awaited_once(
    gated: tuple[ResultWaiter, Gate, RecordedReads], fake_server: fakeredis.FakeServer
) -> None:
    waiter, gate, _ = gated
    first, other = await two_streams_read(waiter, fake_server)
    await waiter.expect(first, ["c1"])
    futures = await waiter.expect(first, ["c1"])  # a takeover's turn expects it again
    await waiter.expect(other, ["d1", "d2"])
    feed_reporter(fake_server).post(first, result("c1"))
    assert (await asyncio.wait_for(futures["c1"], 5)).call_id == "c1"
    # Counted twice, the session would still await c1: it went on, and the reader pauses.
    await asyncio.wait_for(gate.paused.wait(), 5)
    assert gate.pauses == [0.25]


async def test_with_fewer_calls_awaited_every_result_is_read_at_once(
    gated: tuple[ResultWaiter, Gate, RecordedReads], fake_server: fakeredis.FakeServer
) -> None:
    waiter, gate, _ = gated
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    for call_id in ("c1", "c2", "c3"):  # one call awaited at a time, below min_awaited=2
        futures = await waiter.expect(stream, [call_id])
        feed_reporter(fake_server).post(stream, result(call_id))
        assert (await asyncio.wait_for(futures[call_id], 5)).call_id == call_id
    # The reader decides in the step that resolves the future: it has decided by now.
    assert gate.pauses == []


def test_a_pause_is_due_only_after_a_session_went_on_and_under_load() -> None:
    batching = ReadBatching(pause_s=0.01, min_awaited=64)
    assert batching.due(went_on=1, awaited=64)
    assert not batching.due(went_on=1, awaited=63)  # few calls: no result waits
    # A wake-up, a rejected entry, or results that leave every session waiting.
    assert not batching.due(went_on=0, awaited=500)
    assert not ReadBatching.off().due(went_on=100, awaited=10_000)


def test_a_negative_pause_or_no_calls_is_refused() -> None:
    with pytest.raises(ValueError, match="pause must be >= 0"):
        ReadBatching(pause_s=-0.001, min_awaited=64)
    with pytest.raises(ValueError, match="number of calls >= 1"):
        ReadBatching(pause_s=0.01, min_awaited=0)


def test_the_replica_reads_results_as_its_settings_say() -> None:
    url = "redis://127.0.0.1:1/0"  # never connected: building a replica opens nothing
    default = Replica(Settings(redis_url=url)).waiter.batching
    assert (default.pause_s, default.min_awaited) == (0.010, 64)
    tuned = Replica(Settings(redis_url=url, result_batch_ms=2, result_batch_min_calls=8))
    assert (tuned.waiter.batching.pause_s, tuned.waiter.batching.min_awaited) == (0.002, 8)
    assert not Replica(Settings(redis_url=url, result_batch_ms=0)).waiter.batching.due(1, 10**6)
