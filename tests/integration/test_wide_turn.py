"""A turn of 10,000+ calls under its lease on a real Redis server, whose Lua unpacks at
most about 8,000 values into one call: end to end on a real io worker, and its writes
driven directly."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from tests.integration import fleet_tools
from toolfleet.orchestrator import replica as replica_module
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.launch import pools_of, specs_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.cli.main import CPU_CONCURRENCY
from toolfleet.orchestrator.connections import reader_client
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.parked import ParkedTurns
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.reporting import FEED_MAXLEN

pytestmark = pytest.mark.integration

WIDE = 10_001
PLAIN = CeleryPublisher(None)  # type: ignore[arg-type]  # prepares messages only: no client
S1 = session_key("app", "ann", "s1")


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


def dispatches(queue: str) -> list[Dispatch]:
    return [
        PLAIN.dispatch(ToolCall(
            call_id=f"c{i}", tool="echo", args={"n": i}, session_id="s1", app_name="app",
            user_id="ann", invocation_id="i", agent="a", state={}, reply_to="r",
            dispatched_at=time.time(),
        ), queue)
        for i in range(WIDE)
    ]  # fmt: skip


async def test_a_turn_of_ten_thousand_calls_is_sent_and_parked_under_its_lease(
    client: aioredis.Redis,
) -> None:
    keys = Keys(f"wide-{uuid.uuid4().hex[:8]}")
    queue, sent = f"{keys.prefix}:tools", f"{keys.prefix}:sent"
    leases = Leases(client, keys, "replica-a", ttl_s=30)
    token = leases.token()
    await leases.acquire(S1, token)
    fence = leases.fence(S1, token)
    await CeleryPublisher(client).publish(dispatches(queue), record_in=sent, fence=fence)
    assert await client.llen(queue) == WIDE
    assert await client.scard(sent) == WIDE

    # Their results kept for the turn in one hash, under the same lease.
    parked = ParkedTurns(client, keys)
    results = [
        ToolResult(call_id=f"c{i}", tool="echo", session_id="s1", invocation_id="i",
                   status=CallStatus.SUCCESS, response={"n": i})
        for i in range(WIDE)
    ]  # fmt: skip
    await parked.park("turn-1", results, fence)
    assert await client.hlen(keys.parked("turn-1")) == WIDE + 1  # and the call order

    # Another replica holds the session now: nothing of a second wide turn is sent.
    await client.set(keys.lease(S1), "replica-b/1")
    with pytest.raises(LeaseLostError):
        await CeleryPublisher(client).publish(
            dispatches(f"{queue}:late"), record_in=f"{sent}:late", fence=fence
        )
    assert await client.exists(f"{queue}:late", f"{sent}:late") == 0
    await client.delete(queue, sent, keys.parked("turn-1"), keys.lease(S1))


async def test_a_turn_of_a_thousand_calls_is_answered_on_the_embedded_default(
    settings: Settings,
) -> None:
    """The workers `toolfleet run` starts for the agent, no setting changed: the model's
    1,000 calls of one turn all run, and it gets every response, in call order."""
    for name in ("max_calls_per_turn", "max_parallel_calls", "io_concurrency", "io_intake"):
        assert getattr(settings, name) == Settings.model_fields[name].default, name
    calls = [Call("shout", {"text": f"t{i}"}) for i in range(1000)]
    model = ScriptedModel([call(*calls), say("done")])
    agent = Agent(name="thousand_agent", tools=[fleet_tools.shout], model=model)
    with WorkerGroup(settings) as group:
        group.start_all(specs_for(pools_of(agent, settings), settings, CPU_CONCURRENCY))
        async with Runner(agent, settings) as runner:
            updates = [
                u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
            ]
    assert answers(updates) == [{"shouted": f"T{i}"} for i in range(1000)]


def answers(updates: Sequence[object]) -> list[object]:
    """The function responses the model got, in order."""
    return [
        p.function_response.response
        for u in updates
        if isinstance(u, Event) and u.content is not None
        for p in u.content.parts or ()
        if p.function_response is not None
    ]


async def test_a_turn_of_ten_thousand_calls_runs_end_to_end(settings: Settings) -> None:
    """The model asks for 10,001 calls in one turn (within max_calls_per_turn): each runs
    on the io worker and the model gets every response, in call order.

    The calls go to an io pool of their own: the session's shared io worker (another
    test's, busy or slow) must not take a share of them and decide the test's time."""
    update = {"max_calls_per_turn": WIDE, "default_timeout_s": 120, "default_io_pool": "wide_io"}
    wide = settings.model_copy(update=update)
    calls = [Call("shout", {"text": f"t{i}"}) for i in range(WIDE)]
    model = ScriptedModel([call(*calls), say("done")])
    agent = Agent(name="wide_agent", tools=tools_in_module(fleet_tools), model=model)
    with WorkerGroup(wide) as group:
        group.start_all([WorkerSpec(["wide_io"], 200, "wide-io")])
        async with Runner(agent, wide) as runner:
            updates = [
                u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
            ]
    assert answers(updates) == [{"shouted": f"T{i}"} for i in range(WIDE)]


async def test_results_trimmed_off_the_feed_while_the_reader_stalled_all_arrive(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The orchestrator's result reader stalls once it has read the new session's
    stream (a CPU spike, a long pause), until the workers have posted every result of
    the turn, three times as many as the feed keeps: the oldest are trimmed off the feed
    unread. The reader sees the gap in the feed's numbers and reads them on the
    session's stream: every call is answered."""
    wide = FEED_MAXLEN * 3
    stalled = settings.model_copy(update={"default_io_pool": "feed_io"})
    keys = Keys(stalled.key_prefix)
    counter = redis.Redis.from_url(stalled.redis_url or "")
    posted_before = int(counter.get(keys.results_feed_count()) or 0)
    session_streams = f"{keys.prefix}:results:"  # Keys.results of any session
    reads: list[str] = []  # "session": a read that named the session's stream; "stalled"

    async def stall_until_posted() -> None:
        deadline = time.monotonic() + 60
        while int(counter.get(keys.results_feed_count()) or 0) < posted_before + wide:
            assert time.monotonic() < deadline, f"the workers posted fewer than {wide} results"
            await asyncio.sleep(0.02)  # ok: polls a counter that worker processes raise

    def stalling_reader(url: str, **options: Any) -> aioredis.Redis:
        client = reader_client(url, **options)
        execute = client.execute_command

        async def execute_command(*args: Any, **kwargs: Any) -> Any:
            if args[0] == "XREAD":
                if any(str(a).startswith(session_streams) for a in args):
                    reads.append("session")
                elif "session" in reads and "stalled" not in reads:
                    reads.append("stalled")
                    await stall_until_posted()
            return await execute(*args, **kwargs)

        client.execute_command = execute_command  # type: ignore[method-assign]
        return client

    monkeypatch.setattr(replica_module, "reader_client", stalling_reader)
    calls = [Call("shout", {"text": f"t{i}"}) for i in range(wide)]
    model = ScriptedModel([call(*calls), say("done")])
    agent = Agent(name="stalled_agent", tools=[fleet_tools.shout], model=model)
    logs = caplog.at_level(logging.INFO, "toolfleet.orchestrator.fleet.results")
    with logs, WorkerGroup(stalled) as group:
        group.start_all([WorkerSpec(["feed_io"], 500, "feed-io")])
        async with Runner(agent, stalled) as runner:
            updates = [
                u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
            ]
    counter.close()
    assert "stalled" in reads, "the reader never stalled: the test did not test the gap"
    assert "entries were trimmed before this replica read them" in caplog.text
    assert answers(updates) == [{"shouted": f"T{i}"} for i in range(wide)]
