"""Worker faults: per function call id, exactly one final function response reaches the model.

Real redis-server, real `celery worker` processes killed with SIGKILL, the orchestrator
(a Runner) in this process with an offline scripted model; tools in worker_fault_tools.
Each test whose mechanism depends on the broker runs with the tool queues on Redis and
on RabbitMQ (tests.faults.brokers); the others on Redis, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults import probe
from tests.faults.brokers import ON_EACH_BROKER, REDIS_ONLY, Broker, publishing
from tests.faults.worker_fault_tools import (
    OVERRUN_LIMIT_S,
    fault_agent,
    one_call,
    release_key,
    started_key,
)
from tests.support import first_deliveries, tool_call, until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess, WorkerSpec
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.keys import Keys, SessionKey, queue_name, session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult
from toolfleet.workers.deliveries import uses_claims

pytestmark = [pytest.mark.integration, ON_EACH_BROKER]

Report = Callable[[str, object], None]

# Waits for things that take well under a second; generous for a loaded machine.
START_TIMEOUT_S = 15.0
RUN_TIMEOUT_S = 25.0
# The orchestrator's wait beyond a tool's limit while a killed call is redelivered:
# long enough that a slow machine cannot turn a recovery into a TimeoutError.
PATIENT_GRACE_S = 15.0
# The tool limit where a pool child is killed. Prefork notices a dead child at once,
# or - when it misses the exit - at its next pool check, every 5 s; a call whose hard
# limit (limit + 1 s) passes first is acked as timed out and never redelivered.
CHILD_KILL_LIMIT_S = 8.0
# The broker's redelivery bound is its part alone (on Redis the visibility timeout +
# sweep interval, from the delivery): it leaves no room for timer lateness, the
# redelivery and the rerun.
RECOVERY_SLACK_S = 2.0


@pytest.fixture
def broker(settings: Settings, client: redis.Redis) -> Broker:
    return Broker(settings, client)


def patient(settings: Settings, grace_s: float = PATIENT_GRACE_S) -> Settings:
    """The orchestrator's settings: the workers' own, with another result grace."""
    return settings.model_copy(update={"result_grace_s": grace_s})


@pytest.fixture
def child_kill_settings(settings: Settings) -> Settings:
    """Workers and orchestrator for pool child kills: a tool limit over prefork's 5 s check."""
    return patient(settings).model_copy(update={"default_timeout_s": CHILD_KILL_LIMIT_S})


@pytest.fixture
def child_kill_workers(child_kill_settings: Settings) -> Iterator[WorkerGroup]:
    with WorkerGroup(child_kill_settings) as group:
        yield group


@dataclass
class Run:
    """One invocation running in a task; its updates kept with their monotonic time."""

    runner: Runner
    session_id: str
    updates: list[tuple[float, Update]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    on_update: Callable[[Update], Any] | None = None

    @property
    def key(self) -> SessionKey:
        """The key of user u1's session `session_id` (the user every run here is)."""
        return session_key(self.runner.app_name, "u1", self.session_id)

    async def _collect(self, message: str) -> None:
        async for update in self.runner.run(
            user_id="u1", session_id=self.session_id, message=message
        ):
            self.updates.append((time.monotonic(), update))
            if self.on_update is not None:
                await self.on_update(update)

    async def finish(self) -> None:
        assert self.task is not None
        await asyncio.wait_for(self.task, RUN_TIMEOUT_S)

    def finished(self, call_id: str) -> list[tuple[float, ToolResult]]:
        """Every result of the call the loop received (the invariant: exactly one)."""
        return [
            (at, u.result)
            for at, u in self.updates
            if isinstance(u, CallFinished) and u.result.call_id == call_id
        ]

    def dispatched_at(self) -> float:
        return next(at for at, u in self.updates if isinstance(u, CallsDispatched))

    async def responses(self, call_id: str) -> list[dict[str, Any]]:
        """The function responses for the call stored in the session."""
        session = await self.runner.store.get(self.key)
        contents = [e.content for e in session.events if e.content is not None]
        return _responses(contents, call_id)

    def model_saw(self, call_id: str) -> list[dict[str, Any]]:
        """The function responses for the call in the model's last request."""
        model = self.runner.model
        assert isinstance(model, ScriptedModel)
        return _responses(list(model.requests[-1].contents), call_id)


def _responses(contents: list[Any], call_id: str) -> list[dict[str, Any]]:
    return [
        dict(part.function_response.response or {})
        for content in contents
        for part in content.parts or ()
        if part.function_response is not None and part.function_response.id == call_id
    ]


@contextlib.asynccontextmanager
async def running(
    settings: Settings,
    agent: Agent,
    message: str,
    *,
    session_id: str | None = None,
    on_update: Callable[[Update], Any] | None = None,
) -> AsyncIterator[Run]:
    async with Runner(agent, settings) as runner:
        run = Run(runner, session_id or uuid.uuid4().hex, on_update=on_update)
        run.task = asyncio.create_task(run._collect(message))
        try:
            yield run
        finally:
            if not run.task.done():
                run.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run.task


async def next_start(aclient: aioredis.Redis, prefix: str, tool: str, run: Run) -> dict[str, Any]:
    """Block until `tool` announces its next execution (or the run ends without it)."""
    assert run.task is not None
    pop = asyncio.ensure_future(aclient.blpop([started_key(prefix, tool)], START_TIMEOUT_S))
    await asyncio.wait({pop, run.task}, return_when=asyncio.FIRST_COMPLETED)
    if not pop.done():
        pop.cancel()
        run.task.result()  # the run's own error, if it failed
        raise AssertionError(f"the run ended before {tool} started: {run.updates}")
    popped = pop.result()
    assert popped is not None, f"{tool} did not start within {START_TIMEOUT_S:g} s"
    entry: dict[str, Any] = json.loads(popped[1])
    return entry


def worker_of(workers: WorkerGroup, start: dict[str, Any]) -> WorkerProcess:
    """The worker whose pool child runs the announced execution."""
    (worker,) = [w for w in workers.workers if w.process.pid == start["ppid"]]
    return worker


async def test_pool_child_killed_mid_tool_is_redelivered_and_answered_once(
    settings: Settings,
    child_kill_settings: Settings,
    child_kill_workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Report,
) -> None:
    worker = child_kill_workers.start(["default"], concurrency=2)
    agent = fault_agent({"": one_call("wf_hang_once")})
    async with running(child_kill_settings, agent, "hang") as run:
        first = await next_start(aclient, settings.key_prefix, "wf_hang_once", run)
        assert first["execution"] == 1 and first["ppid"] == worker.process.pid
        os.kill(first["pid"], signal.SIGKILL)  # the pool child only: the worker lives
        killed_at = time.monotonic()
        await run.finish()

        call_id = first["call_id"]
        ((answered_at, result),) = run.finished(call_id)
        assert result.status is CallStatus.SUCCESS, (result, worker.log()[-3000:])
        assert result.response["execution"] == 2
        assert result.response["pid"] != first["pid"]  # another pool child ran it
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]
    executions = probe.executions(client, settings.key_prefix, call_id)
    assert executions == 2
    assert worker.alive()
    # Prefork saw its child die and requeued the call (task_reject_on_worker_lost).
    wait_for(lambda: "WorkerLostError" in worker.log(), 5, "the worker to log the lost child")
    report_figure("executions", executions)
    report_figure("kill -> response", f"{answered_at - killed_at:.2f} s")


async def test_whole_worker_killed_mid_tool_call_completes_on_another_within_the_bound(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    broker: Broker,
    report_figure: Report,
) -> None:
    tools = list(load_definitions(settings.tool_modules).tools.values())
    redelivery = broker.redelivery(tools)  # what the workers were configured with
    bound = redelivery.latest_s
    workers.start_all([WorkerSpec(["default"], 1, "wa"), WorkerSpec(["default"], 1, "wb")])
    agent = fault_agent({"": one_call("wf_hang_once")})
    # The orchestrator must out-wait the recovery: on Redis a worker's death is noticed
    # only through the broker's visibility timeout, well past the tool's own limit.
    async with running(patient(settings, bound + PATIENT_GRACE_S), agent, "hang") as run:
        first = await next_start(aclient, settings.key_prefix, "wf_hang_once", run)
        victim = worker_of(workers, first)
        (survivor,) = [w for w in workers.workers if w is not victim]
        broker.ready_for_a_kill()
        victim.kill()  # SIGKILL to its whole process group: main process and pool
        killed_at, killed_wall = time.monotonic(), time.time()
        await run.finish()

        call_id = first["call_id"]
        ((answered_at, result),) = run.finished(call_id)
        assert result.status is CallStatus.SUCCESS, (result, survivor.log()[-3000:])
        assert result.worker == survivor.hostname
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]
    assert probe.executions(client, settings.key_prefix, call_id) == 2
    rerun_after = result.started_at - killed_wall
    answered_after = answered_at - killed_at
    # The broker's bound: a dead worker's call runs elsewhere at most this long after
    # (plus scheduling slack on a loaded machine), and not before the broker redelivers
    # it: on Redis its visibility timeout (counted from the delivery, which came a moment
    # before the first execution's start); on RabbitMQ the dropped connection, at once.
    assert rerun_after <= bound + RECOVERY_SLACK_S, (rerun_after, bound)
    assert answered_after <= bound + RECOVERY_SLACK_S, (answered_after, bound)
    assert result.started_at - first["at"] >= redelivery.earliest_s - 0.5, (first, result)
    report_figure(f"kill -> rerun ({broker.name})", f"{rerun_after:.2f} s")
    report_figure(f"kill -> response ({broker.name})", f"{answered_after:.2f} s")
    report_figure(f"recovery bound ({broker.name})", f"{bound:g} s")


async def test_tool_that_always_kills_its_worker_stops_after_max_deliveries(
    settings: Settings,
    child_kill_settings: Settings,
    child_kill_workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    broker: Broker,
    report_figure: Report,
) -> None:
    worker = child_kill_workers.start(["default"], concurrency=1)
    agent = fault_agent({"": one_call("wf_crash_worker")})
    async with running(child_kill_settings, agent, "crash") as run:
        await run.finish()
        ((_, result),) = [(at, u.result) for at, u in run.updates if isinstance(u, CallFinished)]
        call_id = result.call_id
        n = settings.max_deliveries
        assert result.response == {
            "status": "error",
            "error_type": "WorkerLost",
            "error_message": (
                f"tool 'wf_crash_worker' was delivered {n} times and its worker died each "
                "time, so it was not run again"
            ),
        }, worker.log()[-3000:]
        assert result.worker == worker.hostname  # the guard answered, not a deadline
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]
    assert worker.alive()
    # The refused delivery was acknowledged: nothing left to deliver again.
    assert broker.left_of(call_id, [worker]) == 0
    assert broker.waiting() == 0
    executions = probe.executions(client, settings.key_prefix, call_id)
    assert executions == n
    assert first_deliveries(client, Keys(settings.key_prefix), call_id) == n + 1
    report_figure("executions", f"{executions} (max_deliveries {n})")


# The deadline is the orchestrator's and the late result travels on the session's Redis
# stream: the broker only carried the message, as in every test here.
@REDIS_ONLY
async def test_tool_past_its_time_limit_is_answered_at_the_deadline_and_its_late_result_ignored(
    settings: Settings,
    workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Report,
) -> None:
    workers.start(["default"], concurrency=1)
    agent = fault_agent(
        {"^overrun": one_call("wf_overrun"), "^echo": one_call("wf_echo", {"text": "hi"})}
    )

    async def release_on_deadline(update: Update) -> None:
        if isinstance(update, CallFinished) and update.result.tool == "wf_overrun":
            await aclient.rpush(release_key(settings.key_prefix, update.result.call_id), 1)

    # No grace: the deadline is the tool's limit, and the worker answers later (the tool
    # swallows its soft limit and returns before the hard one).
    orchestrator = patient(settings, 0.0)
    async with running(orchestrator, agent, "overrun", on_update=release_on_deadline) as run:
        await run.finish()
        ((answered_at, timed_out),) = [
            (at, u.result) for at, u in run.updates if isinstance(u, CallFinished)
        ]
        call_id = timed_out.call_id
        assert timed_out.worker == "orchestrator"
        assert timed_out.response["error_type"] == "TimeoutError"
        assert f"did not answer within {OVERRUN_LIMIT_S:g} s" in timed_out.response["error_message"]
        deadline_after = answered_at - run.dispatched_at()
        assert OVERRUN_LIMIT_S <= deadline_after < OVERRUN_LIMIT_S + 5

        stream = Keys(settings.key_prefix).results(run.key)

        def late() -> list[ToolResult]:
            entries = client.xrange(stream)
            found = [ToolResult.model_validate_json(f[RESULT_FIELD.encode()]) for _, f in entries]
            return [r for r in found if r.call_id == call_id]

        wait_for(late, 10, "the late result on the session's stream")
        (late_result,) = late()
        assert late_result.status is CallStatus.SUCCESS and late_result.response["late"] is True
        assert late_result.finished_at >= timed_out.finished_at

    # The next invocation reads the session's stream again, late result included.
    async with running(orchestrator, agent, "echo", session_id=run.session_id) as again:
        await again.finish()
        ((_, echoed),) = [(at, u.result) for at, u in again.updates if isinstance(u, CallFinished)]
        assert echoed.response == {"result": "hi"}
        assert await again.responses(call_id) == [timed_out.response]
    assert probe.executions(client, settings.key_prefix, call_id) == 1
    report_figure("dispatch -> timeout response", f"{deadline_after:.2f} s")
    report_figure(
        "deadline -> late result", f"{late_result.finished_at - timed_out.finished_at:.2f} s"
    )


# The tool's own guard keeps the effect once; the redelivery it survives is the pool
# child kill's, run on both brokers above.
@REDIS_ONLY
async def test_redelivered_tool_applies_its_side_effect_once(
    settings: Settings,
    child_kill_settings: Settings,
    child_kill_workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    report_figure: Report,
) -> None:
    worker = child_kill_workers.start(["default"], concurrency=2)
    agent = fault_agent({"": one_call("wf_charge", {"account": "acct-7"})})
    async with running(child_kill_settings, agent, "charge") as run:
        first = await next_start(aclient, settings.key_prefix, "wf_charge", run)
        assert first["applied"] is True  # the side effect happened; the tool has not returned
        os.kill(first["pid"], signal.SIGKILL)
        await run.finish()

        call_id = first["call_id"]
        ((_, result),) = run.finished(call_id)
        assert result.response == {"account": "acct-7", "charged_now": False, "execution": 2}, (
            worker.log()[-3000:]
        )
        assert await run.responses(call_id) == [result.response]
        assert run.model_saw(call_id) == [result.response]
    assert probe.executions(client, settings.key_prefix, call_id) == 2
    effects = probe.effects(client, settings.key_prefix, "charge:acct-7")
    assert effects == [call_id]
    report_figure("side effects", f"{len(effects)} in 2 executions")


async def test_a_call_whose_pool_child_died_after_posting_its_result_is_not_run_again(
    settings: Settings,
    child_kill_workers: WorkerGroup,
    client: redis.Redis,
    aclient: aioredis.Redis,
    broker: Broker,
    report_figure: Report,
) -> None:
    """Given a pool child that posts a call's result and dies before the broker's ack,
    and no orchestrator to store the answer meanwhile (it is down, or far behind), when
    Celery redelivers the message, the call is not run again: posting its final result
    closed it. One execution, one result on the stream."""
    worker = child_kill_workers.start(["default"], concurrency=1)
    keys = Keys(settings.key_prefix)
    call_id = f"after-post-{uuid.uuid4().hex[:8]}"
    stream = keys.results(session_key("app", "u", "after-post"))  # tool_call's app and user
    call = tool_call(call_id, "wf_die_after_post", "after-post", stream)
    async with publishing(settings, aclient) as publisher:
        dispatch = publisher.dispatch(call, queue_name("default"))
        await publisher.publish([dispatch], record_in="after-post:sent")
        unrun = f"call {call_id} (wf_die_after_post) was answered before it started"
        await until(lambda: unrun in worker.log(), "the redelivery after the death", 15)
    assert "WorkerLostError" in worker.log()  # prefork saw its child die, and requeued
    # Counted again without claims; with them (RabbitMQ, or a fleet key) the delivery
    # that ran settled its claim before its child died, and a copy that finds it settled
    # is not counted.
    delivered = keys.deliveries(call.call_id, 0, call.dispatched_at)
    assert client.get(delivered) == (b"1" if uses_claims(settings) else b"2")
    # The redelivery was acknowledged, unrun: nothing left to deliver again.
    assert broker.left_of(call.call_id, [worker]) == 0
    assert probe.executions(client, settings.key_prefix, call.call_id) == 1
    ((_, fields),) = client.xrange(call.reply_to)
    result = ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
    assert (result.status, result.response) == (CallStatus.SUCCESS, {"execution": 1})
    report_figure("executions after a child died between post and ack", 1)
