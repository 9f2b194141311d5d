"""Bounds on a real Redis: the completions stream's cap and trim
(exactly once still holds), a turn's call cap with real workers, session expiry."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults import probe
from tests.faults.exactly_once_tools import ticketing
from tests.faults.fault_tools import step
from tests.faults.test_exactly_once import final_responses, of_u, stored_events, ticket_turn
from tests.support import until
from toolfleet import Runner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.connections import decoded
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.compaction import SessionLimits
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.completions import COMPLETIONS_GROUP, TRIM_COMPLETIONS_LUA, Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CompletionsFullError, SessionNotFoundError
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import CallStatus, PendingCall


def ticket(completions: Completions, session_id: str) -> str:
    """A pending call of app `ticketing` (as a worker registers it); its id."""
    call_id = uuid.uuid4().hex
    completions.register(
        PendingCall(
            call_id=call_id,
            tool="open_ticket",
            session_id=session_id,
            app_name="ticketing",
            user_id="u",
            agent="ticketing",
            invocation_id="i",
            ticket={"status": "pending"},
            created_at=time.time(),
        )
    )
    return call_id


def entry_ids(client: redis.Redis, stream: str) -> list[str]:
    return [decoded(entry_id) for entry_id, _ in client.xrange(stream)]


def test_a_post_beyond_the_cap_of_unapplied_results_is_refused(
    settings: Settings, client: redis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    stream = keys.completions("ticketing")
    completions = Completions(client, keys, maxlen=2)
    calls = [ticket(completions, f"s{i}") for i in range(3)]
    posted = [completions.post_result(c, {"status": "done"}) for c in calls[:2]]

    with pytest.raises(CompletionsFullError, match="TOOLFLEET_COMPLETIONS_MAXLEN") as refused:
        completions.post_result(calls[2], {"status": "done"})
    assert "holds 2 results not applied yet" in str(refused.value)
    assert entry_ids(client, stream) == posted  # nothing added, nothing dropped
    assert completions.get(calls[2]).call_id == calls[2]  # still pending: retry later


def test_trimming_drops_only_what_the_group_is_done_with(
    settings: Settings, client: redis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    stream = keys.completions("ticketing")
    ids = [decoded(client.xadd(stream, {"completion": str(n)})) for n in range(6)]
    assert client.eval(TRIM_COMPLETIONS_LUA, 1, stream, COMPLETIONS_GROUP) == 0  # no group
    client.xgroup_create(stream, COMPLETIONS_GROUP, id="0")
    client.xreadgroup(COMPLETIONS_GROUP, "a", {stream: ">"}, count=3)  # read 0-2
    client.xack(stream, COMPLETIONS_GROUP, ids[1], ids[2])  # 1 and 2 done, 0 is not
    client.eval(TRIM_COMPLETIONS_LUA, 1, stream, COMPLETIONS_GROUP)
    assert entry_ids(client, stream) == ids  # 0 read, unacknowledged: nothing before it goes

    client.xack(stream, COMPLETIONS_GROUP, ids[0])
    client.xreadgroup(COMPLETIONS_GROUP, "b", {stream: ">"}, count=1)  # read 3, not acked
    client.eval(TRIM_COMPLETIONS_LUA, 1, stream, COMPLETIONS_GROUP)
    assert entry_ids(client, stream) == ids[3:]  # read-and-pending 3, unread 4 and 5 stay


async def test_trimmed_completions_still_apply_exactly_once(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    """Given three results posted, one read by a replica that then stalls: trimming keeps
    all three; an orchestrator applies each once (taking the stalled one over), and the
    stream is empty afterwards."""
    keys = Keys(settings.key_prefix)
    stream = keys.completions("ticketing")
    workers.start(["default"], concurrency=1)
    calls = {f"trim{n}": await ticket_turn(settings, f"trim{n}") for n in range(3)}
    completions = Completions(client, keys, maxlen=settings.completions_maxlen)
    client.xgroup_create(stream, COMPLETIONS_GROUP, id="0", mkstream=True)
    for session_id, call_id in calls.items():
        completions.post_result(call_id, {"status": f"done {session_id}"})
    client.xreadgroup(COMPLETIONS_GROUP, "stalled", {stream: ">"}, count=1)
    client.eval(TRIM_COMPLETIONS_LUA, 1, stream, COMPLETIONS_GROUP)
    assert client.xlen(stream) == 3

    async with Orchestrator([ticketing], settings, claim_idle_ms=500):
        await until(lambda: client.hlen(keys.pending()) == 0, "every result applied", 20)
        await until(lambda: client.xlen(stream) == 0, "the stream emptied", 10)
    for session_id, call_id in calls.items():
        events = stored_events(client, keys, of_u("ticketing", session_id))
        finals = final_responses(events, call_id)[1:]
        assert finals == [{"status": f"done {session_id}"}]  # once, after the ticket
    assert client.xlen(keys.dead_letters()) == 0


many_steps = Agent(
    name="many_steps",
    instruction="Run the steps.",
    tools=[step],
    offline_script=[call(*(Call("step", {"n": n, "seconds": 0}) for n in range(5))), say("ok")],
)


async def test_calls_beyond_the_turn_cap_never_reach_a_queue(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    capped = settings.model_copy(update={"max_calls_per_turn": 2})
    workers.start(["default"], concurrency=1)
    async with Runner(many_steps, capped) as runner:
        updates = [u async for u in runner.run(user_id="u", session_id="cap", message="go")]
    results = [u.result for u in updates if isinstance(u, CallFinished)]
    ran = [r for r in results if r.status is CallStatus.SUCCESS]
    refused = [r for r in results if r.response.get("error_type") == "TooManyCalls"]
    assert sorted(r.response["step"] for r in ran) == [0, 1] and len(refused) == 3
    for result in refused:
        assert probe.executions(client, settings.key_prefix, result.call_id) == 0
    assert client.llen(queue_name("default")) == 0
    stored = stored_events(client, Keys(settings.key_prefix), of_u(runner.app_name, "cap"))
    assert sum(1 for e in stored for c in e.calls if c.call_id in {r.call_id for r in refused}) == 3


async def test_an_idle_session_expires(settings: Settings, client: redis.Redis) -> None:
    keys = Keys(settings.key_prefix)
    async with aioredis.Redis.from_url(settings.require_redis_url()) as commands:
        store = SessionStore(commands, keys, limits=SessionLimits(ttl_s=1))
        session = await store.create("app", "u", "brief")
        await store.append(session, Event(invocation_id="i", author="note"))
        await store.get(session.key)  # cached
        gone = (keys.session(session.key), keys.events(session.key), keys.user_sessions("app", "u"))
        await until(lambda: client.exists(*gone) == 0, "the session to expire", 5)
        with pytest.raises(SessionNotFoundError):
            await store.get(session.key)
