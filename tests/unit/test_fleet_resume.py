"""CeleryFleet.run: a turn taken over after its replica died (resume=True), and a wide
turn's calls sent in bounded writes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import fakeredis

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
from toolfleet.shared.tools import FunctionTool

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


async def test_a_resumed_turn_sends_only_what_was_never_sent_and_collects_the_rest(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "r1", block_ms=20)
    await waiter.start()
    await fake_redis.set(
        KEYS.worker("w1"),
        json.dumps({"hostname": "w1", "pools": ["default"], "pid": 1, "started_at": 0.0}),
    )
    await fake_redis.zadd(KEYS.workers(), {"w1": time.time() + 60})
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


async def test_a_wide_turn_is_sent_at_once_in_bounded_writes_the_first_with_the_turn(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "r1", block_ms=20)
    await waiter.start()
    await fake_redis.set(
        KEYS.worker("w1"),
        json.dumps({"hostname": "w1", "pools": ["default"], "pid": 1, "started_at": 0.0}),
    )
    await fake_redis.zadd(KEYS.workers(), {"w1": time.time() + 60})
    publisher = CountingPublisher(fake_redis)
    fleet = CeleryFleet(publisher, waiter, Settings(), KEYS, LivePools(fake_redis, KEYS))
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
        await waiter.stop()
        await reader.aclose()
