"""Load with a fault: 1,000 concurrent sessions x 3 parallel calls, one worker killed
and replaced mid-run. Every call id must get exactly one response."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bench import tools as bench_tools
from bench.harness import start_toolfleet, summary_ms, toolfleet_workers
from bench.scale import audit, run_sessions, scale_model
from tests.faults.conftest import fault_settings
from tests.faults.servers import RedisServer
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.celery_config import recovery_bound_s

SESSIONS = 1000
TURNS = 2
CALLS = 3
TOOL_MS = 20


async def test_a_thousand_sessions_lose_nothing_while_a_worker_is_killed_and_replaced(
    redis_server: RedisServer, report_figure: Callable[[str, object], None]
) -> None:
    # The bench's tools on the bench pool. The orchestrator waits past the recovery
    # bound (grace 30 s), so the killed worker's calls run again rather than time out.
    settings = fault_settings(
        redis_server.url(),
        tool_modules=["bench.tools"],
        default_pool="bench",
        default_timeout_s=10,
        result_grace_s=30,
        lease_ttl_s=30,
    )
    agent = Agent(name="load", tools=[bench_tools.sleep_ms])
    with toolfleet_workers(settings, pool_impl="threads") as group:
        victim, _ = start_toolfleet(group, 2, 8, "load")
        async with Runner(agent, settings, model=scale_model(CALLS, TOOL_MS)) as runner:
            run = asyncio.create_task(run_sessions(runner, SESSIONS, TURNS))
            # Kill once the run is well under way: a third of the calls are out.
            started = time.monotonic()
            await asyncio.to_thread(
                wait_for,
                lambda: run.done() or victim.log().count(" received") >= 200,
                60,
                "the victim to take calls",
            )
            await asyncio.to_thread(victim.kill)
            killed_at = time.monotonic() - started
            await asyncio.to_thread(start_toolfleet, group, 1, 8, "replacement")
            outcome = await asyncio.wait_for(run, 240)
            counts = (await audit(runner.store, runner.app_name, outcome.ids, TURNS, CALLS)).counts

    calls = SESSIONS * TURNS * CALLS
    latency = summary_ms(outcome.latencies)
    assert counts["lost"] == 0 and counts["duplicated"] == 0, counts
    assert counts["answered_turns"] == SESSIONS * TURNS, counts
    assert not outcome.failures and not outcome.stuck
    report_figure("sessions x turns x parallel calls", f"{SESSIONS} x {TURNS} x {CALLS}")
    report_figure("worker killed at", f"{killed_at:.1f} s (replacement started at once)")
    report_figure("throughput", f"{calls / outcome.elapsed:.0f} calls/s ({outcome.elapsed:.1f} s)")
    report_figure("turn latency p50 / p99", f"{latency['p50']:.0f} / {latency['p99']:.0f} ms")
    report_figure("recovery bound (killed worker's calls)", f"{recovery_bound_s(settings, []):g} s")
    report_figure(
        "lost / duplicated / error responses",
        f"{counts['lost']} / {counts['duplicated']} / {counts['error_responses']}",
    )
