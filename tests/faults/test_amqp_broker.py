"""The tool queues on RabbitMQ (`TOOLFLEET_BROKER_URL=amqp://...`): per function call id,
exactly one final function response reaches the model, through the outbox relay.

Real RabbitMQ on 127.0.0.1:5672 (guest/guest), in a vhost of the module's own made with
`rabbitmqctl` and deleted after; real redis-server and `celery worker` processes; the
orchestrator (a Runner) in this process. Skipped, with the reason, where RabbitMQ is not
there, except under CI=true.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from kombu import Connection, Exchange, Queue

from tests.faults import probe
from tests.faults.brokers import Broker
from tests.faults.conftest import fault_settings
from tests.faults.fault_tools import step
from tests.faults.held_tools import held_worker, io_counted_hold, release_key
from tests.faults.io_pool_tools import started_key
from tests.faults.rabbit import (
    RabbitNode,
    close_connections,
    private_node,
    rabbit_vhost,
    vhost_of,
)
from tests.faults.servers import RedisServer
from tests.faults.test_io_intake import deliveries, push_unreadable, successor
from tests.faults.test_io_pools import WIDE, agent_of, assert_run_again_once, one_turn
from tests.faults.test_worker_faults import (
    PATIENT_GRACE_S,
    next_start,
    patient,
    running,
)
from tests.faults.worker_fault_tools import wf_hang_once
from tests.support import tool_call, until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.fleet import outbox
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.queues import amqp_queue_states, broker_queue_states
from toolfleet.orchestrator.fleet.refusals import REFUSED, RefusalAnswers
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.call_signing import CALL_FIELD, CallSigner, call_fields
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name, session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner

pytestmark = pytest.mark.integration

Report = Callable[[str, object], None]

PARALLEL_CALLS = 8
# Bounds one relay step: a batch, and its messages one at a time, on a loaded machine.
RELAY_STEP_TIMEOUT_S = 30
# Bounds a turn of a few short calls on a loaded machine: a worker that stalls misses it.
TURN_TIMEOUT_S = 60
DUPLICATED_CALLS = 4


@pytest.fixture(scope="module")
def broker_url() -> Iterator[str]:
    """A vhost of this module's own on the local RabbitMQ."""
    with rabbit_vhost() as url:
        yield url


@pytest.fixture
def settings(redis_server: RedisServer, broker_url: str) -> Settings:
    """The fault rig's settings with the tool queues on RabbitMQ."""
    return fault_settings(redis_server.url(), broker_url=broker_url)


@pytest.fixture
def workers(settings: Settings) -> Iterator[WorkerGroup]:
    with WorkerGroup(settings) as group:
        yield group


def steps_agent(n: int, seconds: float) -> Agent:
    """One turn of `n` parallel `step` calls, then text."""
    calls = [Call("step", {"n": i, "seconds": seconds}) for i in range(n)]
    model = ScriptedModel(by_message={"": [call(*calls), say("done")]})
    return Agent(name="amqp_steps", tools=[step], model=model)


async def assert_each_answered_once(run: Any, call_ids: list[str]) -> None:
    for call_id in call_ids:
        ((_, result),) = run.finished(call_id)
        assert result.status is CallStatus.SUCCESS, result
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]


def started_ids(run: Any) -> list[str]:
    return sorted({u.result.call_id for _, u in run.updates if hasattr(u, "result")})


async def test_a_turn_of_parallel_calls_on_rabbitmq_is_answered_exactly_once(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    workers.start(["default"], concurrency=4)
    async with running(settings, steps_agent(PARALLEL_CALLS, 0.0), "go") as run:
        await run.finish()
        call_ids = started_ids(run)
        assert len(call_ids) == PARALLEL_CALLS, run.updates
        await assert_each_answered_once(run, call_ids)
    for call_id in call_ids:
        assert probe.executions(client, settings.key_prefix, call_id) == 1
    # Every message left the outbox for RabbitMQ; none went on a Redis list.
    assert client.llen(outbox.outbox_key(Keys(settings.key_prefix))) == 0
    assert client.llen("tools.default") == 0


class _DiesBeforeRemoval:
    """The outbox's removal script, failing once: the relay dies after the broker
    confirmed a batch and before it removed it from the outbox."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.failed = 0

    async def run(self, client: aioredis.Redis, numkeys: int, *args: Any) -> Any:
        if not self.failed:
            self.failed += 1
            raise ConnectionError("the relay died between the confirm and the removal")
        return await self.script.run(client, numkeys, *args)


async def test_a_message_whose_properties_do_not_read_is_dropped_by_a_prefork_worker(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    worker = workers.start(["default"], concurrency=2)
    # First in the queue: py-amqp raised reading one in Celery's consumer, which connected
    # again, got the same one first and raised where Celery ends the worker: it exited,
    # as would each restart of it.
    forged = [{"content_type": b"\xff\xfejson"}, {"reply_to": b"\xc3("}]
    push_unreadable(settings, forged, queue_name("default"))

    async with running(settings, steps_agent(PARALLEL_CALLS, 0.0), "go") as run:
        await asyncio.wait_for(run.finish(), TURN_TIMEOUT_S)
        call_ids = started_ids(run)
        assert len(call_ids) == PARALLEL_CALLS, (run.updates, worker.log()[-3000:])
        await assert_each_answered_once(run, call_ids)
        answered_by = {r.worker for c in call_ids for _, r in run.finished(c)}
        assert answered_by == {worker.hostname}
    # Both are dropped, the second perhaps after the calls behind it ran.
    dropped = "dropped a message whose properties could not be read"
    await until(lambda: worker.log().count(dropped) == 2, "both forged ones dropped", 30)
    log = worker.log()
    assert "UnicodeDecodeError" in log
    assert "Connection to broker lost" not in log  # Celery's words: taken on its first
    assert worker.alive()  # it exited ('Unrecoverable error') on the second reading
    # Each was dropped and acknowledged: once the worker is gone, RabbitMQ has nothing
    # left to deliver (an empty call id: any message).
    assert Broker(settings, client).left_of("", [worker]) == 0


async def test_a_relay_that_dies_between_confirm_and_removal_runs_each_call_once(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dying = _DiesBeforeRemoval(outbox._REMOVE)
    monkeypatch.setattr(outbox, "_REMOVE", dying)
    # Twice the processes as calls, and calls longer than the relay's retry: each copy
    # is taken by a process of its own while the first one still runs (not closed yet).
    workers.start(["default"], concurrency=2 * DUPLICATED_CALLS)
    async with running(settings, steps_agent(DUPLICATED_CALLS, 1.0), "go") as run:
        await run.finish()
        call_ids = started_ids(run)
        assert len(call_ids) == DUPLICATED_CALLS, run.updates
        await assert_each_answered_once(run, call_ids)
    assert dying.failed == 1  # every message was published twice
    for call_id in call_ids:
        assert probe.executions(client, settings.key_prefix, call_id) == 1, call_id
    assert client.llen(outbox.outbox_key(Keys(settings.key_prefix))) == 0


async def test_a_worker_killed_holding_unacked_messages_has_them_redelivered_and_answered_once(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
) -> None:
    calls = [Call("wf_hang_once") for _ in range(3)]
    model = ScriptedModel(by_message={"": [call(*calls), say("done")]})
    agent = Agent(name="amqp_hang", tools=[wf_hang_once], model=model)
    victim = workers.start(["default"], concurrency=3)
    async with running(patient(settings, PATIENT_GRACE_S), agent, "go") as run:
        firsts = [await next_start(aclient, settings.key_prefix, "wf_hang_once", run)]
        firsts += [await next_start(aclient, settings.key_prefix, "wf_hang_once", run)]
        firsts += [await next_start(aclient, settings.key_prefix, "wf_hang_once", run)]
        assert {f["ppid"] for f in firsts} == {victim.process.pid}
        victim.kill()  # SIGKILL, main process and pool: its connection drops
        # Off the event loop: the wait for its first heartbeat must not stall the lease.
        survivor = await asyncio.to_thread(workers.start, ["default"], concurrency=3)
        await run.finish()
        call_ids = sorted(f["call_id"] for f in firsts)
        assert started_ids(run) == call_ids
        await assert_each_answered_once(run, call_ids)
        for call_id in call_ids:
            ((_, result),) = run.finished(call_id)
            assert result.worker == survivor.hostname
            assert result.response["execution"] == 2
    for call_id in call_ids:
        assert probe.executions(client, settings.key_prefix, call_id) == 2
    wait_for(lambda: survivor.alive(), 1, "the survivor to live")


async def test_the_relay_moves_the_outbox_to_rabbitmq_where_status_counts_the_queue(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, aclient: aioredis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    pool = f"amqp-depth-{uuid.uuid4().hex[:6]}"  # a queue no worker takes
    signer = CallSigner.of(settings.fleet_key)  # the workers run signed calls alone
    publisher = CeleryPublisher(aclient, outbox=outbox.outbox_key(keys), signer=signer)
    stream = keys.results(session_key("app", "u", "depth"))
    calls = [tool_call(f"depth-{i}", "step", "depth", stream) for i in range(3)]
    dispatches = [publisher.dispatch(c, queue_name(pool)) for c in calls]
    await publisher.publish(dispatches, record_in="depth:sent")
    broker = settings.require_broker_url()
    assert [s.waiting for s in amqp_queue_states(broker, [pool])] == [0]  # not declared yet
    assert client.llen(outbox.outbox_key(keys)) == 3
    relay = outbox.OutboxRelay(aclient, keys, broker)
    try:
        assert await relay.relay_once() == 3
        assert await relay.relay_once() == 0
    finally:
        await relay.stop()
    assert client.llen(outbox.outbox_key(keys)) == 0
    assert client.llen(queue_name(pool)) == 0  # nothing on a Redis list
    (state,) = await broker_queue_states(aclient, [pool], broker)
    assert (state.pool, state.waiting, state.oldest_age_s) == (pool, 3, None)
    # A worker started after the relay declared the queue declares it alike, and runs them.
    workers.start([pool], concurrency=1)
    wait_for(lambda: client.xlen(stream) == 3, 30, "the three results")
    assert [s.waiting for s in amqp_queue_states(broker, [pool])] == [0]


def declare_classic(url: str, queue: str) -> None:
    """Declare `queue` a classic queue: the relay's declaration of it as a quorum queue
    is then refused (406 PRECONDITION_FAILED, on the channel), as every message for it."""
    with Connection(url) as connection:
        channel: Any = connection.channel()
        channel.queue_declare(queue, durable=True, auto_delete=False)


def queued_calls(url: str, queue: str) -> set[str]:
    """The call ids of the messages waiting on `queue`, taken off it."""
    ids = set()
    with Connection(url) as connection:
        channel: Any = connection.channel()
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            _args, kwargs, _embed = json.loads(message.body)
            ids.add(call_fields(kwargs[CALL_FIELD])["call_id"])
    return ids


async def test_a_message_rabbitmq_refuses_is_answered_as_an_error_and_its_batch_goes_on(
    settings: Settings, client: redis.Redis, aclient: aioredis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    suffix = uuid.uuid4().hex[:6]
    taken, refusing = f"amqp-taken-{suffix}", f"amqp-refusing-{suffix}"  # no worker takes them
    broker = settings.require_broker_url()
    declare_classic(broker, queue_name(refusing))
    signer = CallSigner.of(settings.fleet_key)
    publisher = CeleryPublisher(aclient, outbox=outbox.outbox_key(keys), signer=signer)
    stream = keys.results(session_key("app", "u", "refused"))
    calls = [tool_call(f"refused-{i}", "step", "refused", stream) for i in range(5)]
    pools = [taken, taken, refusing, taken, taken]  # the refused one inside the batch
    await publisher.publish(
        [publisher.dispatch(c, queue_name(p)) for c, p in zip(calls, pools, strict=True)],
        record_in="refused:sent",
    )
    relay = outbox.OutboxRelay(aclient, keys, broker, answers=RefusalAnswers.of(client, settings))
    try:
        assert await asyncio.wait_for(relay.relay_once(), RELAY_STEP_TIMEOUT_S) == 5
    finally:
        await relay.stop()
    assert client.llen(outbox.outbox_key(keys)) == 0
    # Each of the others is on its queue (those published before the refusal twice: a
    # worker runs a copy once).
    assert queued_calls(broker, queue_name(taken)) == {calls[i].call_id for i in (0, 1, 3, 4)}
    # The refused call has its one answer, an error the orchestrator accepts, and is closed.
    (entry,) = client.xrange(stream)
    result = ToolResult.model_validate_json(entry[1][RESULT_FIELD.encode()])
    assert (result.call_id, result.status) == (calls[2].call_id, CallStatus.ERROR)
    assert result.response["error_type"] == REFUSED
    assert "PRECONDITION_FAILED" in result.response["error_message"]
    assert ResultSigner(settings.fleet_key or "").valid(
        entry[1][RESULT_FIELD.encode()], entry[1][SIGNATURE_FIELD.encode()]
    )
    assert client.exists(keys.closed(calls[2].session_key, calls[2].call_id))


@pytest.mark.timeout(180)  # the default 120 s, and a RabbitMQ node's start and stop
async def test_a_turn_across_a_rabbitmq_restart_is_answered_exactly_once(
    redis_server: RedisServer, client: redis.Redis, report_figure: Report
) -> None:
    # A node of the test's own: restarting the local one would drop every other module's
    # connections (the suite runs modules in parallel).
    with private_node() as node:
        settings = fault_settings(redis_server.url(), broker_url=node.url)
        with WorkerGroup(settings) as workers:
            workers.start(["default"], concurrency=2)
            executions = await _turn_across_a_restart(settings, client, node)
    assert all(n >= 1 for n in executions), executions
    report_figure("executions per call across the restart", executions)


async def _turn_across_a_restart(
    settings: Settings, client: redis.Redis, node: RabbitNode
) -> list[int]:
    """Executions per call of a turn whose broker restarts while its calls run."""
    # Six calls of 1 s on two processes: some run, some wait in the queue at the restart.
    async with running(patient(settings), steps_agent(6, 1.0), "go") as run:

        def one_started() -> bool:
            ids = [
                c.call_id for _, u in run.updates if isinstance(u, CallsDispatched) for c in u.calls
            ]
            return any(probe.executions(client, settings.key_prefix, i) for i in ids)

        await until(one_started, "a call to start", 30)
        # Off the event loop: the replica keeps its lease and its relay retries meanwhile.
        await asyncio.to_thread(node.restart)
        await run.finish()
        call_ids = started_ids(run)
        assert len(call_ids) == 6, run.updates
        await assert_each_answered_once(run, call_ids)
    return [probe.executions(client, settings.key_prefix, i) for i in call_ids]


async def test_an_io_worker_on_rabbitmq_runs_a_wave_of_200_async_calls_at_once(
    settings: Settings, workers: WorkerGroup, report_figure: Report
) -> None:
    worker = workers.start(["io"])  # the settings' io concurrency: its prefetch window
    assert worker.kind == "io" and worker.concurrency == settings.io_concurrency >= 200
    wave = uuid.uuid4().hex
    calls = [Call("io_meet", {"wave": wave, "n": 200})] * 200
    results = await one_turn(settings, agent_of(*calls))
    assert len(results) == 200 and len({r.call_id for r in results}) == 200
    assert all(r.status is CallStatus.SUCCESS for r in results), results[:3]
    assert {r.worker for r in results} == {worker.hostname}
    # All 200 were taken within one prefetch window and waited for each other.
    assert all(r.response == {"met": True} for r in results), results[:3]
    # The intake took them, over its own connection, in batches.
    assert f"intake: taking {queue_name(settings.default_io_pool)}" in worker.log()
    spread = max(r.started_at for r in results) - min(r.started_at for r in results)
    report_figure("first start -> last start (200 calls, one io process)", f"{spread:.2f} s")
    # Turn after turn, the worker keeps taking calls: its pool threads' task events fill
    # Celery's event buffer many times over, and only its consumer's thread may publish
    # them (a pool thread waiting for RabbitMQ's confirm there stopped the worker).
    for turn in range(3):
        wave = uuid.uuid4().hex
        later = await one_turn(settings, agent_of(*[Call("io_meet", {"wave": wave, "n": 40})] * 40))
        assert [r.status for r in later] == [CallStatus.SUCCESS] * 40, (turn, later[:3])


@contextlib.contextmanager
def task_events(url: str) -> Iterator[Callable[[], dict[str, set[tuple[str, str]]]]]:
    """The task events published on the vhost of `url` from now on, to Celery's event
    exchange, which Flower reads: a function giving those so far, (task id, hostname)
    by type, and the task-received ones by task name too (`name:<task>`)."""
    events: dict[str, set[tuple[str, str]]] = defaultdict(set)
    with Connection(url) as connection:
        exchange = Exchange("celeryev", type="topic")  # as Celery declares it
        queue = Queue(f"tap-{uuid.uuid4().hex}", exchange, "task.#", exclusive=True)
        bound = queue(connection.default_channel)
        bound.declare()

        def received() -> dict[str, set[tuple[str, str]]]:
            while (message := bound.get(no_ack=True)) is not None:
                body = message.decode()
                for event in body if isinstance(body, list) else [body]:  # a batch, or one
                    told = (event["uuid"], event["hostname"])
                    events[event["type"]].add(told)
                    if event["type"] == "task-received":
                        events[f"name:{event['name']}"].add(told)
            return events

        yield received


async def test_an_io_worker_killed_holding_a_batch_of_unacked_calls_has_each_answered_once(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, report_figure: Report
) -> None:
    victim = workers.start(["io"], name="io-victim")
    agent = agent_of(*[Call("io_hang_once", {})] * 100)
    started = started_key(settings.key_prefix, "io_hang_once")
    async with running(patient(settings).model_copy(update=WIDE), agent, "go") as run:
        await until(lambda: client.llen(started) >= 100, "100 calls to start", 15)
        victim.kill()  # SIGKILL: its connection drops
        # All 100 were taken and none acknowledged: RabbitMQ has them all back at once.
        broker, pool = settings.require_broker_url(), settings.default_io_pool
        await until(lambda: amqp_queue_states(broker, [pool])[0].waiting == 100, "100 back", 10)
        first = [json.loads(e) for e in client.lrange(started, 0, -1)]
        assert {e["execution"] for e in first} == {1} and len(first) == 100
        survivor = await asyncio.to_thread(workers.start, ["io"], None, "io-survivor")
        await run.finish()
        # Redelivered, each is no duplicate of a first delivery: counted and run again.
        call_ids = [e["call_id"] for e in first]
        await assert_run_again_once(run, client, settings.key_prefix, call_ids, survivor)
    report_figure("calls redelivered from the killed io worker, each answered once", 100)


async def test_an_io_workers_connection_closed_under_it_reconnects_and_each_call_is_answered(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    worker = held_worker(workers, ["io"])
    # Held until the connections are closed: none ends (and is acknowledged) before,
    # however long closing them takes on a loaded machine.
    hold = uuid.uuid4().hex
    held = [Call("io_counted_hold", {"hold": hold})] * 40
    model = ScriptedModel([call(*held), say("done")])
    agent = Agent(name="io_agent", tools=[io_counted_hold], model=model)
    executions = f"{settings.key_prefix}:probe:executions:*"
    async with running(patient(settings).model_copy(update=WIDE), agent, "go") as run:
        await until(lambda: len(client.keys(executions)) == 40, "40 calls to start", 10)
        # Every connection of the vhost: the intake's, Celery's consumer's, the relay's.
        await asyncio.to_thread(close_connections, settings.require_broker_url())
        client.set(release_key(settings.key_prefix, hold), 1, ex=60)
        await run.finish()
        results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
        assert len(results) == len({r.call_id for r in results}) == 40
        for result in results:
            assert result.status is CallStatus.SUCCESS, result
            assert await run.responses(result.call_id) == [result.response]
    await until(lambda: "connected to RabbitMQ again" in worker.log(), "the reconnection", 10)
    assert worker.alive()
    # Taken back with the connection while it ran, each call came back to the worker as
    # a copy that waited for the run in progress, found its claim settled (the call
    # answered) and did not run, not counted.
    broker = settings.require_broker_url()
    await until(lambda: amqp_messages(broker, queue_name("io")) == 0, "the copies' acks", 10)
    once = [deliveries(settings, client, r.call_id) for r in results]
    assert once == [1] * 40, once
    runs = [probe.executions(client, settings.key_prefix, r.call_id) for r in results]
    assert runs == [1] * 40, runs
    # The intake takes calls on its new connection, acknowledges each, and Flower hears
    # of each on a new connection too.
    with task_events(settings.require_broker_url()) as events:
        later = await one_turn(settings, agent_of(*[Call("io_nap", {"seconds": 0.1})] * 10))
        assert [r.status for r in later] == [CallStatus.SUCCESS] * 10
        assert {r.worker for r in later} == {worker.hostname}

        def told() -> bool:  # of each of the 10 (the copies' events may come meanwhile)
            received = events()["name:tool.io_nap"]
            return len(received) == 10 and received <= events()["task-succeeded"]

        await asyncio.to_thread(wait_for, told, 10, "Flower's task events")
        assert events()["name:tool.io_nap"] <= events()["task-started"]
        assert {host for _, host in events()["name:tool.io_nap"]} == {worker.hostname}
    # A warm shutdown lets the calls run again on the new connection finish: then the
    # worker holds nothing unacknowledged, and none is delivered again.
    worker.request_stop()
    await asyncio.to_thread(worker.wait_stopped, 10.0)
    counted = [deliveries(settings, client, r.call_id) for r in [*results, *later]]
    await successor(settings, workers)
    assert [deliveries(settings, client, r.call_id) for r in [*results, *later]] == counted


def amqp_messages(url: str, queue: str) -> int:
    """The messages of `queue` on RabbitMQ, ready or delivered and not acknowledged."""
    columns = ["name", "messages"]
    listed = subprocess.run(
        ["rabbitmqctl", "list_queues", "-q", "--no-table-headers", "-p", vhost_of(url), *columns],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    counts = dict(line.split() for line in listed.stdout.splitlines() if line.strip())
    return int(counts.get(queue, 0))


async def test_a_call_published_twice_runs_once_when_one_copy_comes_redelivered(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, aclient: aioredis.Redis
) -> None:
    """The relay published a call twice (a lost confirm); one copy was delivered to a
    consumer that went away without acknowledging it, so it comes again redelivered
    (RabbitMQ's flag) while the other copy runs: it is the duplicate, not run."""
    keys = Keys(settings.key_prefix)
    pool = f"amqp-twice-{uuid.uuid4().hex[:6]}"  # no worker takes it yet
    signer = CallSigner.of(settings.fleet_key)
    publisher = CeleryPublisher(aclient, outbox=outbox.outbox_key(keys), signer=signer)
    stream = keys.results(session_key("app", "u", "twice"))
    twice = tool_call("twice-1", "step", "twice", stream, {"n": 1, "seconds": 1.5})
    dispatch = publisher.dispatch(twice, queue_name(pool))
    await publisher.publish([dispatch], record_in="twice:sent")
    await publisher.publish([dispatch], record_in="twice:sent")  # the relay's second send
    broker = settings.require_broker_url()
    relay = outbox.OutboxRelay(aclient, keys, broker)
    try:
        assert await relay.relay_once() == 2
    finally:
        await relay.stop()
    with Connection(broker) as taker:  # takes one copy and goes away: it is requeued
        assert taker.default_channel.basic_get(queue=queue_name(pool), no_ack=False) is not None
    workers.start([pool], concurrency=2)
    wait_for(lambda: client.xlen(stream) >= 1, 30, "the call's result")
    wait_for(lambda: amqp_messages(broker, queue_name(pool)) == 0, 30, "both copies settled")
    assert probe.executions(client, settings.key_prefix, "twice-1") == 1
    assert client.xlen(stream) == 1
