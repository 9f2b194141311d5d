"""An async tool stopped by its soft time limit never runs on inside a later call.

A worker process runs coroutine tools on one event loop it keeps. Celery's soft time
limit interrupts the loop from a signal handler, which leaves the tool's task scheduled:
unless the executor cancels it, it wakes up during the next call on that process and
does what it was stopped from doing. Real redis-server, one real `celery worker` with
one pool process, the orchestrator (a Runner) in this process; tools in async_fault_tools.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from tests.faults.async_fault_tools import (
    LATE_LIMIT_S,
    LATE_SLEEP_S,
    cancelled_key,
    effect_key,
    late_then_second_agent,
    started_key,
)
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import CallStatus, ToolResult

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 25.0
# The orchestrator waits this long past a limit, so the worker's own answer is the one seen.
PATIENT_GRACE_S = 15.0
# How long past the first tool's wake-up time the test watches for its side effect.
WATCH_SLACK_S = 1.0


async def run_turn(settings: Settings, message: str) -> list[ToolResult]:
    """Run one invocation of the agent to its end; the results, in arrival order."""
    async with Runner(late_then_second_agent(), settings) as runner:

        async def collect() -> list[ToolResult]:
            updates = runner.run(user_id="u1", session_id=uuid.uuid4().hex, message=message)
            return [u.result async for u in updates if isinstance(u, CallFinished)]

        return await asyncio.wait_for(collect(), RUN_TIMEOUT_S)


async def test_async_tool_past_its_time_limit_never_runs_on_in_the_next_call(
    settings: Settings,
    workers: WorkerGroup,
    aclient: aioredis.Redis,
    report_figure: Callable[[str, object], None],
) -> None:
    worker = workers.start(["io"])  # async tools' pool: one process, one event loop
    prefix = settings.key_prefix
    patient = settings.model_copy(update={"result_grace_s": PATIENT_GRACE_S})

    late, second = await run_turn(patient, "late, then another call")

    assert late.tool == "af_late_effect" and second.tool == "af_give_loop_time"
    # The first call is answered by the worker at its soft limit, with the timeout error.
    assert late.worker == worker.hostname, (late, worker.log()[-3000:])
    assert late.status is CallStatus.ERROR
    assert late.response == {
        "status": "error",
        "error_type": "TimeoutError",
        "error_message": f"tool 'af_late_effect' exceeded its time limit of {LATE_LIMIT_S:g} s",
    }
    # The second call ran in the same process, on the same loop, past the first one's
    # wake-up time: there a leftover task would have run.
    (raw,) = await aclient.lrange(started_key(prefix), 0, -1)
    started = json.loads(raw)
    assert started["call_id"] == late.call_id
    assert second.status is CallStatus.SUCCESS, second
    assert second.response["pid"] == started["pid"]
    wake_up_at = started["at"] + LATE_SLEEP_S
    assert second.finished_at > wake_up_at

    # No side effect after the second call finished ...
    effect = effect_key(prefix, late.call_id)
    effects = await aclient.lrange(effect, 0, -1)
    assert effects == [], f"the timed-out call's side effect happened: {effects}, {started}"
    # ... nor within a while after the first tool would have woken up.
    watch_s = max(wake_up_at + WATCH_SLACK_S - time.time(), 0.1)
    appeared = await aclient.blpop([effect], timeout=watch_s)
    assert appeared is None, f"the timed-out call's side effect happened: {appeared}, {started}"
    # Its task was cancelled when the call ended, not forgotten on the loop.
    (cancelled_at,) = await aclient.lrange(cancelled_key(prefix, late.call_id), 0, -1)
    assert float(cancelled_at) <= late.finished_at
    report_figure("side effects of the timed-out call", 0)
    report_figure("start -> cancelled", f"{float(cancelled_at) - started['at']:.2f} s")
