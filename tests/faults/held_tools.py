"""A tool whose calls run until the test releases them, for a worker of its own.

Its time limit is far above the rig's 3 s, and a worker's broker visibility timeout
follows the longest time limit of the tools it loads: so it is not among the rig's
tool modules (a Redis worker loading it would redeliver a dead worker's calls only after
that long). A test starts the worker that runs it with this module added
(`held_worker`).
"""

from __future__ import annotations

import asyncio
import functools
import time

import redis

from tests.faults import probe
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

MODULE = "tests.faults.held_tools"
# How long a held call waits for its release at most, under its own time limit.
HOLD_LIMIT_S = 30.0
HOLD_POLL_S = 0.05


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()  # the worker's, from its environment
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def release_key(prefix: str, hold: str) -> str:
    return f"{prefix}:probe:io:release:{hold}"


def held_worker(workers: WorkerGroup, pools: list[str]) -> WorkerProcess:
    """A worker of `workers` serving `pools` that loads this module too (those started
    after it do not)."""
    modules = [*workers.settings.tool_modules, MODULE]
    workers.extra_env["TOOLFLEET_TOOL_MODULES"] = ",".join(modules)
    try:
        return workers.start(pools)
    finally:
        del workers.extra_env["TOOLFLEET_TOOL_MODULES"]


@tool(timeout_s=HOLD_LIMIT_S + 5)
async def io_counted_hold(hold: str, tool_context: ToolContext) -> dict[str, int]:
    """Records each execution, then waits on the event loop until the test releases
    `hold` (at most HOLD_LIMIT_S), answers which execution it was: a call that is still
    running whatever happens meanwhile, however long that takes.

    Args:
        hold: The name the test releases the calls by.
    """
    execution = probe.record_execution(tool_context.function_call_id)
    client, prefix = _client()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while time.monotonic() < deadline:
        if await asyncio.to_thread(client.exists, release_key(prefix, hold)):
            break
        await asyncio.sleep(HOLD_POLL_S)  # ok: polling the release, as a tool polls an API
    return {"execution": execution}
