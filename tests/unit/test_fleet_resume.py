"""CeleryFleet.run: a turn taken over after its replica died (resume=True), and a wide
turn's calls sent in bounded writes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import fakeredis
import pytest

from toolfleet.orchestrator.fleet.celery_fleet import PUBLISH_BATCH, CeleryFleet
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.fleet.pools import LivePools
from toolfleet.orchestrator.fleet.protocol import PlannedCall, WithFirstSend
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult
from toolfleet.shared.tools import FunctionTool, ToolOptions

KEYS = Keys("t")
S1 = session_key("a", "u", "s1")


def lookup(endpoint: str, api_key: str = "") -> dict[str, str]:
    """Looks something up."""
    return {"endpoint": endpoint}


TOOL = FunctionTool(lookup)


def planned(call_id: str, args: dict[str, Any]) -> PlannedCall:
    call = ToolCall(
        call_id=call_id, tool="lookup", args=args, session_id="s1", app_name="a", user_id="u",
        invocation_id="i", agent="a", reply_to=KEYS.results(S1), dispatched_at=time.time(),
    )  # fmt: skip
    return PlannedCall(call, TOOL)


async def live_default_worker(client: fakeredis.FakeAsyncRedis) -> None:
    """A worker of the default pool, alive for a minute, as its heartbeat records it."""
    await client.set(
        KEYS.worker("w1"),
        json.dumps({"hostname": "w1", "pools": ["default"], "pid": 1, "started_at": 0.0}),
    )
    await client.zadd(KEYS.workers(), {"w1": time.time() + 60})


async def test_a_resumed_turn_sends_only_what_was_never_sent_and_collects_the_rest(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "r1", block_ms=20)
    await waiter.start()
    await live_default_worker(fake_redis)
    fleet = CeleryFleet(
        CeleryPublisher(fake_redis, ["api_key"]),
        waiter,
        Settings(default_timeout_s=5),
        KEYS,
        LivePools(fake_redis, KEYS),
    )
    # The dead replica sent c1 (its result is on the stream) and c2 (still running).
    await fake_redis.sadd(KEYS.dispatched(S1), "c1", "c2")
    done = ToolResult(
        call_id="c1", tool="lookup", session_id="s1", invocation_id="i",
        status=CallStatus.SUCCESS, response={"endpoint": "/a"}, started_at=0, finished_at=0,
    )  # fmt: skip
    await fake_redis.xadd(KEYS.results(S1), {RESULT_FIELD: done.model_dump_json()})
    calls = [
        planned("c1", {"endpoint": "/a"}),
        planned("c2", {"endpoint": "/b"}),
        planned("c3", {"endpoint": "/c"}),  # never sent: sent now
        planned("c4", {"endpoint": "/d", "api_key": "***"}),  # never sent, secret not stored
    ]
    results: list[ToolResult] = []
    two_results = asyncio.Event()

    async def collect() -> None:
        async for result in fleet.run(calls, resume=True):
            results.append(result)
            if len(results) == 2:
                two_results.set()

    running = asyncio.create_task(collect())
    try:
        await asyncio.wait_for(two_results.wait(), 5)
        assert [r.call_id for r in results] == ["c4", "c1"]
        assert results[0].response["error_type"] == "Interrupted"
        assert results[1].response == {"endpoint": "/a"}
        # Only c3 went to the broker; c2's message is still with the worker that runs it.
        sent = [json.loads(m) for m in await fake_redis.lrange("tools.default", 0, -1)]
        assert [m["headers"]["task"] for m in sent] == ["tool.lookup"]
        assert await fake_redis.smembers(KEYS.dispatched(S1)) == {b"c1", b"c2", b"c3"}
    finally:
        running.cancel()
        await waiter.stop()
        await reader.aclose()


class CountingPublisher(CeleryPublisher):
    """Publishes as CeleryPublisher does, and records each write's size and `also`."""

    def __init__(self, client: fakeredis.FakeAsyncRedis) -> None:
        super().__init__(client)
        self.writes: list[tuple[int, bool]] = []
        self.all_sent = asyncio.Event()

    async def publish(
        self,
        dispatches: Sequence[Dispatch],
        *,
        record_in: str,
        fence: Fence | None = None,
        also: WithFirstSend | None = None,
    ) -> None:
        await super().publish(dispatches, record_in=record_in, fence=fence, also=also)
        self.writes.append((len(dispatches), also is not None))
        if sum(n for n, _ in self.writes) == WIDE:
            self.all_sent.set()


WIDE = 2 * PUBLISH_BATCH + 5


@pytest.fixture
async def counted(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> AsyncIterator[tuple[CeleryFleet, CountingPublisher]]:
    """A fleet with a live default worker, whose publisher counts its writes."""
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "r1", block_ms=20)
    await waiter.start()
    await live_default_worker(fake_redis)
    publisher = CountingPublisher(fake_redis)
    yield CeleryFleet(publisher, waiter, Settings(), KEYS, LivePools(fake_redis, KEYS)), publisher
    await waiter.stop()
    await reader.aclose()


async def test_a_wide_turn_is_sent_at_once_in_bounded_writes_the_first_with_the_turn(
    counted: tuple[CeleryFleet, CountingPublisher], fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    fleet, publisher = counted
    calls = [planned(f"c{i}", {"endpoint": f"/{i}"}) for i in range(WIDE)]

    turn_written: list[int] = []

    def with_the_turn(batch: WriteBatch) -> Callable[[Sequence[Any]], Awaitable[None]]:
        batch.set("the-model-turn", "1")

        async def written(replies: Sequence[Any]) -> None:
            turn_written.append(len(replies))

        return written

    async def collect() -> None:
        async for _ in fleet.run(calls, with_first_send=with_the_turn):
            pass

    running = asyncio.create_task(collect())
    try:
        # Every call is sent before any result is in: the defaults put no wave in a turn.
        await asyncio.wait_for(publisher.all_sent.wait(), 10)
        assert publisher.writes == [(PUBLISH_BATCH, True), (PUBLISH_BATCH, False), (5, False)]
        assert len(turn_written) == 1 and await fake_redis.get("the-model-turn") == b"1"
        assert await fake_redis.llen("tools.default") == WIDE
        assert await fake_redis.scard(KEYS.dispatched(S1)) == WIDE
    finally:
        running.cancel()


def gpu_lookup(endpoint: str) -> dict[str, str]:
    """Looks something up on a pool nobody serves."""
    return {"endpoint": endpoint}


GPU_TOOL = FunctionTool(gpu_lookup, options=ToolOptions(pool="gpu"))


async def test_a_turn_given_in_chunks_sends_each_before_asking_for_the_next(
    counted: tuple[CeleryFleet, CountingPublisher], fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    fleet, publisher = counted
    first = [planned(f"c{i}", {"endpoint": f"/{i}"}) for i in range(PUBLISH_BATCH)]
    unserved = PlannedCall(planned("g1", {"endpoint": "/g"}).call, GPU_TOOL)
    later: list[list[PlannedCall]] = [
        [planned(f"c{i}", {"endpoint": f"/{i}"}) for i in range(PUBLISH_BATCH, WIDE - 1)],
        [],  # every call of a chunk answered by the loop: nothing to send
        [unserved, planned(f"c{WIDE - 1}", {"endpoint": "/last"})],
    ]
    sent_when_asked: list[int] = []

    async def more() -> AsyncIterator[list[PlannedCall]]:
        for chunk in later:
            sent_when_asked.append(sum(n for n, _ in publisher.writes))
            yield chunk
        sent_when_asked.append(sum(n for n, _ in publisher.writes))

    turn_writes: list[int] = []

    def with_the_turn(batch: WriteBatch) -> Callable[[Sequence[Any]], Awaitable[None]]:
        async def written(replies: Sequence[Any]) -> None:
            turn_writes.append(len(replies))

        return written

    results: list[ToolResult] = []

    async def collect() -> None:
        async for result in fleet.run(first, with_first_send=with_the_turn, more=more()):
            results.append(result)

    running = asyncio.create_task(collect())
    try:
        await asyncio.wait_for(publisher.all_sent.wait(), 10)
        # Each chunk is asked for once the calls before it went out; the first write
        # carried the model turn, and only it.
        assert sent_when_asked == [PUBLISH_BATCH, WIDE - 1, WIDE - 1, WIDE]
        assert len(turn_writes) == 1 and publisher.writes[0] == (PUBLISH_BATCH, True)
        assert not any(also for _, also in publisher.writes[1:])
        assert await fake_redis.llen("tools.default") == WIDE
        # The call for a pool nobody serves is answered at once, never sent.
        assert [r.call_id for r in results] == ["g1"]
        assert results[0].response["error_type"] == "NoWorkerError"
        assert b"g1" not in await fake_redis.smembers(KEYS.dispatched(S1))
    finally:
        running.cancel()
