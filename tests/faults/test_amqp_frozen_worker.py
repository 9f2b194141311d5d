"""A worker that goes silent on RabbitMQ: frozen (SIGSTOP to its process group), which is
what RabbitMQ sees of a worker whose host or network was lost - its connection stays
open, no socket closes. RabbitMQ closes it once its heartbeats lapse and delivers the
calls it held to another worker, within `amqp_lost_worker_bound_s` (3 heartbeat
timeouts); each call is answered once, and the frozen worker's late results, once it
runs again, are ignored. A worker busy with long calls keeps sending heartbeats and is
not disconnected, and an idle outbox relay keeps its connection.

Real RabbitMQ (a vhost of the module's own), real redis-server, real `celery worker`
processes (prefork and io), the orchestrator (a Runner) in this process; tools in
frozen_worker_tools. The heartbeat timeout is TEST_HEARTBEAT_S, so a freeze resolves in
seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from amqp.exceptions import AMQPError

from tests.faults import probe
from tests.faults.brokers import AMQP_ONLY
from tests.faults.frozen_worker_tools import TOOLS, released_key
from tests.faults.test_io_intake import envelope
from tests.faults.test_worker_faults import Run, next_start, running, worker_of
from tests.faults.worker_fault_tools import one_call, started_key
from tests.support import until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess, WorkerSpec
from toolfleet.orchestrator.fleet.outbox import OutboxRelay, outbox_key
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, Script, ScriptedModel, call, say
from toolfleet.shared.celery_config import amqp_lost_worker_bound_s
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher, queue_depths
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult

pytestmark = [pytest.mark.integration, AMQP_ONLY]

Report = Callable[[str, object], None]

# The heartbeat timeout here: a freeze is noticed within 3 of them (6 s).
TEST_HEARTBEAT_S = 2
# Beyond the bound: the redelivery, the rerun's start and scheduling on a loaded machine.
RERUN_SLACK_S = 2.0
# The calls an io worker holds when it is frozen.
IO_BATCH = 20
# A long call: past 3 heartbeat timeouts, by when RabbitMQ would have closed a silent
# connection.
LONG_CALL_S = 3.5 * TEST_HEARTBEAT_S
LONG_IO_CALLS = 50
# The relay's heartbeat timeout, and how long it idles: past 3 of them, by when RabbitMQ
# would have closed a silent connection.
RELAY_HEARTBEAT_S = 1
RELAY_IDLE_S = 3.5 * RELAY_HEARTBEAT_S
# What a worker logs when it lost its connection: Celery's consumer, the io intake.
CONSUMER_LOST = "Connection to broker lost"
INTAKE_LOST = "the connection to RabbitMQ dropped"


@pytest.fixture
def frozen_settings(settings: Settings) -> Settings:
    """The module's workers and orchestrator: a short heartbeat, the module's tools."""
    return settings.model_copy(
        update={
            "amqp_heartbeat_s": TEST_HEARTBEAT_S,
            "tool_modules": ["tests.faults.frozen_worker_tools"],
        }
    )


@pytest.fixture
def frozen_workers(frozen_settings: Settings) -> Iterator[WorkerGroup]:
    with WorkerGroup(frozen_settings) as group:
        yield group


def agent(scripts: Mapping[str, Script]) -> Agent:
    """An agent whose offline model plays the script whose pattern matches the message."""
    model = ScriptedModel(by_message=scripts)
    return Agent(name="frozen_worker_agent", tools=TOOLS, model=model)


@contextlib.contextmanager
def frozen(worker: WorkerProcess) -> Iterator[float]:
    """SIGSTOP the worker's process group (its main process and pool) until the block
    ends, then SIGCONT; the wall time of the freeze."""
    os.killpg(worker.process.pid, signal.SIGSTOP)
    try:
        yield time.time()
    finally:
        os.killpg(worker.process.pid, signal.SIGCONT)


def late_results(client: redis.Redis, run: Run, call_ids: set[str]) -> list[ToolResult]:
    """The results of `call_ids` posted on the session's stream by their first execution."""
    entries = client.xrange(Keys(run.runner.settings.key_prefix).results(run.key))
    found = [ToolResult.model_validate_json(f[RESULT_FIELD.encode()]) for _, f in entries]
    return [r for r in found if r.call_id in call_ids and r.response.get("execution") == 1]


async def assert_answered_once_by_then(
    settings: Settings,
    echo: str,
    session_id: str,
    answered: Mapping[str, dict[str, Any]],
    thawed: WorkerProcess,
) -> None:
    """A next invocation of session `session_id`, which reads its stream again (the late
    results with it), answered by the thawed worker alone (it took calls again): each
    call still has the one response it was `answered`, in the session and as the model
    sees it."""
    scripts = {"": one_call(echo, {"text": "hi"})}
    async with running(settings, agent(scripts), "echo", session_id=session_id) as again:
        await again.finish()
        (echoed,) = [u.result for _, u in again.updates if isinstance(u, CallFinished)]
        assert (echoed.response, echoed.worker) == ({"result": "hi"}, thawed.hostname)
        for call_id, response in answered.items():
            assert await again.responses(call_id) == [response]
            assert again.model_saw(call_id) == [response]


async def test_a_frozen_prefork_worker_s_call_runs_on_another_within_three_heartbeats(
    settings: Settings,
    frozen_settings: Settings,
    frozen_workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Report,
) -> None:
    bound = amqp_lost_worker_bound_s(frozen_settings)
    frozen_workers.start_all([WorkerSpec(["default"], 1, "fza"), WorkerSpec(["default"], 1, "fzb")])
    async with running(frozen_settings, agent({"": one_call("fz_hold_once")}), "hold") as run:
        first = await next_start(aclient, settings.key_prefix, "fz_hold_once", run)
        victim = worker_of(frozen_workers, first)
        (survivor,) = [w for w in frozen_workers.workers if w is not victim]
        with frozen(victim) as frozen_at:
            await run.finish()  # before the call's deadline (its limit: 20 s)
        call_id = first["call_id"]
        ((_, result),) = run.finished(call_id)
        assert result.status is CallStatus.SUCCESS, (result, survivor.log()[-3000:])
        assert result.worker == survivor.hostname
        assert result.response["execution"] == 2
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]

        # Thawed, the first execution answers too: late, on the session's stream.
        await aclient.set(released_key(settings.key_prefix), 1)
        await until(lambda: late_results(client, run, {call_id}), "the late result", 15)
    # RabbitMQ closed the frozen worker's connections (heartbeats); thawed, it noticed,
    # connected again, and takes calls: the survivor gone, it answers the next one.
    wait_for(lambda: CONSUMER_LOST in victim.log(), 10, "the victim to see its connection lost")
    assert CONSUMER_LOST not in survivor.log()
    await asyncio.to_thread(survivor.stop)
    answered = {call_id: result.response}
    await assert_answered_once_by_then(frozen_settings, "fz_echo", run.session_id, answered, victim)
    assert probe.executions(client, settings.key_prefix, call_id) == 2

    rerun_after = result.started_at - frozen_at
    # Not at once (no socket closed), and within 3 heartbeat timeouts.
    assert TEST_HEARTBEAT_S <= rerun_after <= bound + RERUN_SLACK_S, (rerun_after, bound)
    report_figure("freeze -> rerun (prefork)", f"{rerun_after:.2f} s (bound {bound:g} s)")
    report_figure("freeze -> response (prefork)", f"{result.finished_at - frozen_at:.2f} s")


async def test_a_frozen_io_worker_s_batch_runs_on_another_within_three_heartbeats(
    settings: Settings,
    frozen_settings: Settings,
    frozen_workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Report,
) -> None:
    bound = amqp_lost_worker_bound_s(frozen_settings)
    victim = frozen_workers.start(["io"], name="fz-io-victim")
    calls = [Call("fz_hold_once_io", {})] * IO_BATCH
    scripts = {"": [call(*calls), say("done")]}
    started = started_key(settings.key_prefix, "fz_hold_once_io")
    async with running(frozen_settings, agent(scripts), "hold") as run:
        await until(lambda: client.llen(started) >= IO_BATCH, "the batch to start", 15)
        first = [json.loads(e) for e in client.lrange(started, 0, -1)]
        assert {(e["execution"], e["pid"]) for e in first} == {(1, victim.process.pid)}
        call_ids = {e["call_id"] for e in first}
        # Idle, beside the victim that holds the whole batch unacknowledged.
        survivor = await asyncio.to_thread(frozen_workers.start, ["io"], None, "fz-io-survivor")
        with frozen(victim) as frozen_at:
            await run.finish()
        results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
        assert len(results) == IO_BATCH
        for result in results:
            assert result.status is CallStatus.SUCCESS, result
            assert result.worker == survivor.hostname
            assert result.response["execution"] == 2
            assert len(run.finished(result.call_id)) == 1
            assert await run.responses(result.call_id) == [result.response]
            assert run.model_saw(result.call_id) == [result.response]

        client.set(released_key(settings.key_prefix), 1)
        await until(
            lambda: len(late_results(client, run, call_ids)) == IO_BATCH, "the late results", 15
        )
    wait_for(lambda: INTAKE_LOST in victim.log(), 10, "the victim's intake to see the loss")
    assert INTAKE_LOST not in survivor.log()
    await asyncio.to_thread(survivor.stop)
    answered = {r.call_id: r.response for r in results}
    await assert_answered_once_by_then(
        frozen_settings, "fz_echo_io", run.session_id, answered, victim
    )
    assert all(probe.executions(client, settings.key_prefix, c) == 2 for c in call_ids)

    first_rerun = min(r.started_at for r in results) - frozen_at
    last_rerun = max(r.started_at for r in results) - frozen_at
    assert first_rerun >= TEST_HEARTBEAT_S, first_rerun
    assert last_rerun <= bound + RERUN_SLACK_S, (last_rerun, bound)
    last_answer = max(r.finished_at for r in results) - frozen_at
    report_figure(
        "freeze -> rerun (io)", f"{first_rerun:.2f}-{last_rerun:.2f} s (bound {bound:g} s)"
    )
    report_figure(f"freeze -> last of {IO_BATCH} responses (io)", f"{last_answer:.2f} s")


async def test_workers_busy_past_three_heartbeats_keep_their_connections(
    settings: Settings,
    frozen_settings: Settings,
    frozen_workers: WorkerGroup,
    client: redis.Redis,
    report_figure: Report,
) -> None:
    prefork, io = frozen_workers.start_all([WorkerSpec(["default"], 1), WorkerSpec(["io"])])
    calls = [Call("fz_busy", {"seconds": LONG_CALL_S})]
    calls += [Call("fz_busy_io", {"seconds": LONG_CALL_S})] * LONG_IO_CALLS
    scripts = {"^busy": [call(*calls), say("done")]}
    async with running(frozen_settings, agent(scripts), "busy") as run:
        await run.finish()
    results = [u.result for _, u in run.updates if isinstance(u, CallFinished)]
    assert len(results) == 1 + LONG_IO_CALLS
    for result in results:
        assert result.status is CallStatus.SUCCESS, result
        assert result.response["execution"] == 1
        assert result.worker == (prefork if result.tool == "fz_busy" else io).hostname
        assert result.finished_at - result.started_at >= LONG_CALL_S
        assert probe.executions(client, settings.key_prefix, result.call_id) == 1
    assert CONSUMER_LOST not in prefork.log()
    assert INTAKE_LOST not in io.log()
    report_figure(
        "longest call kept its connection",
        f"{max(r.finished_at - r.started_at for r in results):.2f} s "
        f"(heartbeat {TEST_HEARTBEAT_S} s)",
    )


async def test_an_idle_relay_keeps_its_connection_where_an_unkept_one_is_closed(
    settings: Settings,
    client: redis.Redis,
    aclient: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = Keys(settings.key_prefix)
    broker = settings.require_broker_url()
    queue = queue_name(f"fz-relay-{uuid.uuid4().hex[:6]}")  # a queue no worker takes
    relay = OutboxRelay(aclient, keys, broker, heartbeat_s=RELAY_HEARTBEAT_S)
    unkept = AmqpPublisher(broker, heartbeat_s=RELAY_HEARTBEAT_S)

    async def relayed(raw: str) -> None:
        await aclient.lpush(outbox_key(keys), raw)
        relay.wake()
        await until(lambda: not client.llen(outbox_key(keys)), "the relay", 10)

    caplog.set_level(logging.WARNING)
    relay.start()
    try:
        await relayed(envelope(settings, "fz_echo", {"text": "1"}, queue))
        await asyncio.to_thread(unkept.publish, [envelope(settings, "fz_echo", {}, queue)])
        await asyncio.sleep(RELAY_IDLE_S)  # ok: the idle time under test
        await relayed(envelope(settings, "fz_echo", {"text": "2"}, queue))
        # RabbitMQ closed the connection nobody kept alive meanwhile.
        with pytest.raises((OSError, AMQPError)):
            await asyncio.to_thread(unkept.publish, [envelope(settings, "fz_echo", {}, queue)])
    finally:
        await relay.stop()
        unkept.close()
    # The relay's batch after the idle time went out at once: a connection RabbitMQ had
    # closed would have failed it, logged, and left it to the retry.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("toolfleet")] == []
    assert queue_depths(broker, [queue], 5.0) == [3]
