"""Redis under Sentinel (a master, a replica, three sentinels): the master is SIGKILLed
mid-turn, amid a burst of posted completions, while two replicas hold leases, and just
before new turns start.

Invariants under test: the fleet follows the new master and goes on; per function call
id exactly one final function response; no session is written by two replicas; and
nothing acknowledged (a posted completion, a stored turn, a reported result) is lost
in a failover, over repeated failovers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tests.faults import probe
from tests.faults.async_fault_tools import af_give_loop_time
from tests.faults.conftest import fault_settings
from tests.faults.exactly_once_tools import ticketing
from tests.faults.fault_tools import step, three_steps
from tests.faults.sentinels import SentinelRedis
from tests.support import until
from toolfleet import CallStatus, Completions, Runner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.connections import command_client
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import SessionError
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import PendingCall, ToolResult
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.redis_clients import sync_client
from toolfleet.shared.replication import Replication, attach
from toolfleet.shared.reporting import ResultReporter

Figure = Callable[[str, object], None]
SESSIONS = 4  # x 3 calls; 6 worker slots run every slow call at once


@pytest.fixture
def sentinel_redis() -> Iterator[SentinelRedis]:
    with SentinelRedis() as topology:
        yield topology


@pytest.fixture
def settings(sentinel_redis: SentinelRedis) -> Settings:
    # Leases outlive a failover (1-3 s here, more on a loaded machine) and the retries
    # after it: a holder renews through it and keeps them.
    # A result posted during one waits for it, then for the replica that is not back yet
    # (TOOLFLEET_REDIS_WAIT_TIMEOUT_S): the calls' deadline leaves room for both.
    return fault_settings(sentinel_redis.url(), lease_ttl_s=10, default_timeout_s=8)


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    client = resilient_client(settings.require_redis_url())
    yield client
    client.close()


def events_of(client: redis.Redis, keys: Keys, session: SessionKey) -> list[Event]:
    return [Event.model_validate_json(e) for e in client.lrange(keys.events(session), 0, -1)]


def calls_and_responses(events: list[Event]) -> tuple[list[str], list[str]]:
    calls = [c.id or "" for e in events for c in e.get_function_calls()]
    responses = [r.id or "" for e in events for r in e.get_function_responses()]
    return calls, responses


def responses_to(events: list[Event], call_id: str) -> list[dict[str, Any]]:
    return [
        dict(r.response or {})
        for e in events
        for r in e.get_function_responses()
        if r.id == call_id
    ]


def every_call_running(client: redis.Redis, settings: Settings, sessions: list[SessionKey]) -> bool:
    """Whether every call of the sessions' turns has started on a worker. A prefork worker
    pops a message before kombu records it as unacknowledged: a master killed between the
    two loses the message (a known limit, in the README), which is not what is tested here."""
    keys = Keys(settings.key_prefix)
    calls = [c for s in sessions for c in calls_and_responses(events_of(client, keys, s))[0]]
    return len(calls) == 3 * len(sessions) and all(
        probe.executions(client, settings.key_prefix, c) > 0 for c in calls
    )


def fail_over(topology: SentinelRedis) -> float:
    """SIGKILL the master; seconds until every sentinel names the promoted replica."""
    killed_at = time.monotonic()
    topology.kill_master()
    topology.wait_for_failover()
    return time.monotonic() - killed_at


async def test_a_master_killed_mid_turn_is_replaced_and_every_call_answered_once(
    settings: Settings,
    workers: WorkerGroup,
    sentinel_redis: SentinelRedis,
    client: redis.Redis,
    report_figure: Figure,
) -> None:
    """Given four sessions whose slow calls run on the workers, when the master is
    SIGKILLed, the sentinels promote the replica and the orchestrator and the workers
    follow it: every session is answered, each call with exactly one response."""
    workers.start(["default"], concurrency=3)
    workers.start(["default"], concurrency=3)
    keys = Keys(settings.key_prefix)
    sessions = [session_key(three_steps.name, "u", f"s{i}") for i in range(SESSIONS)]

    def all_calls_running() -> bool:
        return every_call_running(client, settings, sessions)

    async with Runner(three_steps, settings) as runner:
        asks = [
            asyncio.create_task(runner.ask(user_id="u", session_id=f"s{i}", message="go"))
            for i in range(SESSIONS)
        ]
        await until(all_calls_running, "every call to be taken", 20)
        failover_s = await asyncio.to_thread(fail_over, sentinel_redis)
        answers = await asyncio.wait_for(asyncio.gather(*asks), 60)

    assert answers == ["finished steps [1, 2, 3]"] * SESSIONS
    for session in sessions:
        calls, responses = calls_and_responses(events_of(client, keys, session))
        assert len(calls) == 3 and sorted(responses) == sorted(calls)
        assert not any(
            "error" in r for c in calls for r in responses_to(events_of(client, keys, session), c)
        )
    report_figure("SIGKILL -> every sentinel names the new master", f"{failover_s:.2f} s")


async def ticket_turns(runner: Runner, count: int) -> list[str]:
    """Run `ticketing` in `count` sessions at once: their call ids, each now pending."""

    async def one(i: int) -> str:
        updates = [u async for u in runner.run(user_id="u", session_id=f"t{i}", message="go")]
        (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
        assert result.status is CallStatus.PENDING
        return result.call_id

    return list(await asyncio.gather(*(one(i) for i in range(count))))


TICKETS = 24
ROUNDS = 2  # failovers, each amid a burst of posts


async def test_completions_posted_across_repeated_failovers_are_all_applied_once(
    settings: Settings,
    workers: WorkerGroup,
    sentinel_redis: SentinelRedis,
    client: redis.Redis,
    report_figure: Figure,
) -> None:
    """Given pending tickets and a thread posting their final results, when the master
    is SIGKILLed in the middle of the burst (twice, the killed node coming back as a
    replica in between), every post that returned (its 202) reaches its session once."""
    workers.start(["default"], concurrency=2)
    keys = Keys(settings.key_prefix)
    async with Runner(ticketing, settings) as runner:
        call_ids = await ticket_turns(runner, TICKETS)
    acknowledged: list[str] = []
    failovers: list[float] = []

    def post_all(ids: list[str], kill_after: int) -> None:
        poster = resilient_client(settings.require_redis_url())
        completions = Completions.of(poster, keys, settings)
        try:
            for n, call_id in enumerate(ids):
                if n == kill_after:
                    killer = threading.Thread(
                        target=lambda: failovers.append(fail_over(sentinel_redis))
                    )
                    killer.start()
                completions.post_result(call_id, {"status": "refunded", "call": call_id})
                acknowledged.append(call_id)
            killer.join()
        finally:
            poster.close()

    per_round = TICKETS // ROUNDS
    async with Orchestrator([ticketing], settings):
        for r in range(ROUNDS):
            if r:
                await asyncio.to_thread(sentinel_redis.restore)
            batch = call_ids[r * per_round : (r + 1) * per_round]
            await asyncio.to_thread(post_all, batch, per_round // 3)

        def all_applied() -> bool:
            return all(
                len(
                    responses_to(events_of(client, keys, session_key("ticketing", "u", f"t{i}")), c)
                )
                == 2
                for i, c in enumerate(call_ids)
            )

        await until(all_applied, "every posted result to reach its session", 30)

    lost = 0
    for i, call_id in enumerate(call_ids):
        events = events_of(client, keys, session_key("ticketing", "u", f"t{i}"))
        responses = responses_to(events, call_id)
        assert responses[0]["status"] == "pending"
        finals = responses[1:]
        lost += call_id in acknowledged and finals != [{"status": "refunded", "call": call_id}]
    assert sorted(acknowledged) == sorted(call_ids)
    assert lost == 0
    report_figure("failovers amid the posts", ", ".join(f"{s:.2f} s" for s in failovers))
    report_figure("acknowledged completions lost", f"{lost} of {len(acknowledged)}")


async def test_leases_held_through_a_failover_keep_each_session_to_one_replica(
    settings: Settings,
    workers: WorkerGroup,
    sentinel_redis: SentinelRedis,
    client: redis.Redis,
    report_figure: Figure,
) -> None:
    """Given two replicas asking for the same sessions at once (each session's lease
    taken by one of them), when the master is SIGKILLed while the slow calls run, the
    holders keep their leases on the new master: the other replica is refused again, and
    each session holds the one invocation of its holder, every call answered once."""
    workers.start(["default"], concurrency=3)
    workers.start(["default"], concurrency=3)
    keys = Keys(settings.key_prefix)
    sessions = [session_key(three_steps.name, "u", f"l{i}") for i in range(SESSIONS)]

    def all_calls_running() -> bool:
        return every_call_running(client, settings, sessions)

    async with Runner(three_steps, settings) as one, Runner(three_steps, settings) as two:

        async def ask(runner: Runner, i: int) -> str | BaseException:
            try:
                return await runner.ask(user_id="u", session_id=f"l{i}", message="go")
            except SessionError as exc:
                return exc

        first = [asyncio.create_task(ask(r, i)) for i in range(SESSIONS) for r in (one, two)]
        await until(all_calls_running, "every call to be taken", 20)
        holders = {s: client.get(keys.lease(s)) for s in sessions}
        failover_s = await asyncio.to_thread(fail_over, sentinel_redis)
        # After the failover, while the turns still run: the leases are where they were.
        again = await asyncio.gather(*(ask(two, i) for i in range(SESSIONS)))
        still = {s: client.get(keys.lease(s)) for s in sessions}
        outcomes = await asyncio.wait_for(asyncio.gather(*first), 60)

    answered = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if isinstance(o, SessionError)]
    assert answered == ["finished steps [1, 2, 3]"] * SESSIONS
    assert len(refused) == SESSIONS
    assert all(isinstance(o, SessionError) for o in again), again
    assert still == holders and None not in holders.values()
    for session in sessions:
        events = events_of(client, keys, session)
        assert len({e.invocation_id for e in events}) == 1  # one replica's invocation
        calls, responses = calls_and_responses(events)
        assert len(calls) == 3 and sorted(responses) == sorted(calls)
    report_figure("SIGKILL -> new master, leases held", f"{failover_s:.2f} s")


# Each turn sends two calls to the prefork pool (`step`, sync) and two to the io pool
# (`af_give_loop_time`, async): both kinds of consumer must follow the new master.
fresh_turn = Agent(
    name="fresh_turn",
    instruction="Run the calls.",
    tools=[step, af_give_loop_time],
    offline_script=[
        call(
            Call("step", {"n": 1, "seconds": 0.05}),
            Call("step", {"n": 2, "seconds": 0.05}),
            Call("af_give_loop_time", {"seconds": 0.05}),
            Call("af_give_loop_time", {"seconds": 0.05}),
        ),
        say("done"),
    ],
)
FRESH_TURNS = 4
FRESH_CALLS = 4 * FRESH_TURNS


async def answered_calls(
    runner: Runner, session_id: str, since: float
) -> list[tuple[float, ToolResult]]:
    """Run `fresh_turn` in a new session: each call's result, with the seconds from
    `since` (time.monotonic) to its arrival."""
    return [
        (time.monotonic() - since, u.result)
        async for u in runner.run(user_id="u", session_id=session_id, message="go")
        if isinstance(u, CallFinished)
    ]


def worker_logs(workers: WorkerGroup) -> str:
    return "\n".join(f"--- {w.hostname}\n{w.log()[-4000:]}" for w in workers.workers)


@pytest.mark.parametrize("sent", ["as the master dies", "once the replica is promoted"])
async def test_turns_started_right_after_a_failover_get_every_result(
    settings: Settings,
    workers: WorkerGroup,
    sentinel_redis: SentinelRedis,
    report_figure: Figure,
    sent: str,
) -> None:
    """Given prefork and io workers that have just served a turn (its acks may still be
    on their way), when the master is SIGKILLed and new turns start at once (while the
    sentinels elect, or as soon as they have), each call of those turns gets its tool's
    own result within its time limit of the promotion: no worker died, none counted as
    gone (NoWorkerError) while its heartbeat could not reach Redis, no TimeoutError."""
    workers.start_all([WorkerSpec(["default"], 2), WorkerSpec(["default"], 2), WorkerSpec(["io"])])
    limit_s = settings.default_timeout_s
    async with Runner(fresh_turn, settings) as runner:
        warm = await answered_calls(runner, "warm", time.monotonic())
        assert [r.status for _, r in warm] == [CallStatus.SUCCESS] * 4
        killed_at = time.monotonic()
        sentinel_redis.kill_master()
        if sent == "once the replica is promoted":
            await asyncio.to_thread(sentinel_redis.wait_for_failover)
        turns = [
            asyncio.create_task(answered_calls(runner, f"f{i}", killed_at))
            for i in range(FRESH_TURNS)
        ]
        if sent == "as the master dies":
            await asyncio.to_thread(sentinel_redis.wait_for_failover)
        promoted_s = time.monotonic() - killed_at
        # The calls' own deadlines answer them by then (TimeoutError at the latest).
        answers = await asyncio.wait_for(asyncio.gather(*turns), 3 * limit_s + 30)

    results = [pair for turn in answers for pair in turn]
    late = [
        (f"{at:.2f} s", r.tool, r.status.value, r.response)
        for at, r in results
        if r.status is not CallStatus.SUCCESS or at > promoted_s + limit_s
    ]
    assert len(results) == FRESH_CALLS
    assert not late, f"promoted at {promoted_s:.2f} s; {late}\n{worker_logs(workers)}"
    first_s = min(at for at, _ in results)
    report_figure(f"SIGKILL -> new master ({sent})", f"{promoted_s:.2f} s")
    report_figure(f"SIGKILL -> first new call answered ({sent})", f"{first_s:.2f} s")
    report_figure(
        f"SIGKILL -> last new call answered ({sent})", f"{max(at for at, _ in results):.2f} s"
    )


@pytest.fixture(scope="module")
def unfailed_sentinel_redis() -> Iterator[SentinelRedis]:
    """A topology no test of its users fails over: they share it."""
    with SentinelRedis() as topology:
        yield topology


@pytest.mark.parametrize("write", ["completion", "worker result", "session write"])
async def test_a_write_is_acknowledged_only_once_the_replica_has_it(
    unfailed_sentinel_redis: SentinelRedis, write: str
) -> None:
    """Given the replica stopped (SIGSTOP: connected, acknowledging nothing), a posted
    completion, a worker's reported result and a fenced session write are not
    acknowledged; once it runs again they are, and the replica holds them by then."""
    sentinel_redis = unfailed_sentinel_redis
    settings = fault_settings(sentinel_redis.url(), redis_wait_timeout_s=30.0)
    keys = Keys(settings.key_prefix)
    client = resilient_client(settings.require_redis_url())
    replica = redis.Redis(port=sentinel_redis.replica.port)
    session = session_key("acks", "u", "s")
    key, done = acknowledged_write(write, settings, client)
    sentinel_redis.pause_replica()
    try:
        writer = threading.Thread(target=done)
        writer.start()
        writer.join(0.5)  # the write itself takes a millisecond or so
        acknowledged_while_stopped = not writer.is_alive()
    finally:
        sentinel_redis.resume_replica()
    writer.join(10)
    assert not writer.is_alive()
    assert not acknowledged_while_stopped
    assert replica.exists(key(keys, session))
    replica.close()
    client.close()


def pending_ticket(call_id: str) -> PendingCall:
    return PendingCall(
        call_id=call_id,
        tool="open_ticket",
        session_id="s",
        app_name="acks",
        user_id="u",
        agent="acks",
        invocation_id="i",
        ticket={"status": "pending"},
        created_at=time.time(),
    )


def acknowledged_write(
    write: str, settings: Settings, client: redis.Redis
) -> tuple[Callable[[Keys, SessionKey], str], Callable[[], None]]:
    """The key `write` adds, and a function making the write (returns once acknowledged)."""
    keys = Keys(settings.key_prefix)
    session = session_key("acks", "u", "s")
    if write == "completion":
        completions = Completions.of(client, keys, settings)
        completions.register(pending_ticket("acks-call"))
        return (
            lambda k, s: k.completions("acks"),
            lambda: completions.post_result("acks-call", {"status": "done"}) and None,
        )
    if write == "worker result":
        reporter = ResultReporter(client, 100, replication=Replication.of(settings))
        result = ToolResult(
            call_id="acks-call",
            tool="t",
            session_id=session,
            invocation_id="i",
            status=CallStatus.SUCCESS,
            response={"ok": True},
        )
        stream = keys.results(session)
        return lambda k, s: stream, lambda: reporter.post(stream, result) and None

    def fenced_write() -> None:
        async def run() -> None:
            replica_client = command_client(settings.require_redis_url())
            attach(replica_client, settings)
            leases = Leases(replica_client, keys, "acks", 30)
            fence = leases.fence(session, "token")
            await replica_client.set(keys.lease(session), "token")
            batch = WriteBatch()
            batch.rpush(keys.events(session), "event")
            try:
                await fence.run(replica_client, batch)
            finally:
                await replica_client.aclose()

        asyncio.run(run())

    return lambda k, s: k.events(s), fenced_write


@pytest.mark.parametrize("max_connections", [None, 4], ids=["plain pool", "blocking pool"])
def test_a_closed_sync_client_leaves_no_connection_to_the_sentinels_open(
    sentinel_redis: SentinelRedis, max_connections: int | None
) -> None:
    """A client of a Sentinel-managed master asks the sentinels where the master is; closed,
    it closes those connections too (left open, their sockets warn when collected, in
    whichever test the collector happens to run)."""
    client = sync_client(sentinel_redis.url(), max_connections=max_connections)
    assert client.ping()
    sentinels = client.connection_pool.sentinel_manager.sentinels  # type: ignore[attr-defined]
    opened = [c for s in sentinels for c in s.connection_pool._available_connections]
    assert any(c._sock is not None for c in opened)

    client.close()

    assert [c for c in opened if c._sock is not None] == []
