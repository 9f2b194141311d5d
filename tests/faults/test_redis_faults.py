"""Redis restarted mid-run (append-only on): workers and orchestrator ride it out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis

from tests.faults import probe
from tests.faults.fault_tools import three_steps
from tests.faults.servers import RedisServer
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

SESSIONS = 4  # x 3 calls; 6 worker slots run every slow call at once


async def test_a_redis_restart_mid_turn_loses_no_call(
    settings: Settings,
    workers: WorkerGroup,
    redis_server: RedisServer,
    report_figure: Callable[[str, object], None],
) -> None:
    workers.start(["default"], concurrency=3)
    workers.start(["default"], concurrency=3)
    client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)

    def all_calls_running() -> bool:
        started = 0
        for i in range(SESSIONS):
            for raw in client.lrange(
                keys.events(session_key(three_steps.name, "u", f"s{i}")), 0, -1
            ):
                started += raw.count(b'"function_call"')
        return started == 3 * SESSIONS and client.llen("tools.default") == 0

    async with Runner(three_steps, settings) as runner:
        asks = [
            asyncio.create_task(runner.ask(user_id="u", session_id=f"s{i}", message="go"))
            for i in range(SESSIONS)
        ]
        # Restart while the slow calls (2 s) run.
        await asyncio.to_thread(wait_for, all_calls_running, 20, "every call to be taken")
        restarted_at = time.monotonic()
        await asyncio.to_thread(redis_server.restart)
        down_s = time.monotonic() - restarted_at
        answers = await asyncio.wait_for(asyncio.gather(*asks), 60)
        after_restart_s = time.monotonic() - restarted_at
        sessions = [
            await runner.store.get(session_key(runner.app_name, "u", f"s{i}"))
            for i in range(SESSIONS)
        ]

    assert answers == ["finished steps [1, 2, 3]"] * SESSIONS
    lost = 0
    for session in sessions:
        responses = [
            p.function_response
            for e in session.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_response
        ]
        calls = [
            p.function_call.id
            for e in session.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_call
        ]
        assert sorted(r.id or "" for r in responses) == sorted(c or "" for c in calls)
        lost += sum(1 for r in responses if "error" in (r.response or {}))
    executions = [
        probe.executions(client, settings.key_prefix, c)
        for s in sessions
        for c in (
            p.function_call.id or ""
            for e in s.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_call
        )
    ]
    client.close()
    assert lost == 0
    report_figure("Redis down (SIGTERM -> answering again)", f"{down_s:.2f} s")
    report_figure("restart -> every session answered", f"{after_restart_s:.2f} s")
    report_figure("lost calls", f"{lost} of {3 * SESSIONS}")
    report_figure("executions per call (max; >1 = redelivered)", max(executions))
