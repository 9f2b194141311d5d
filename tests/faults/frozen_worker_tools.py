"""Tools of the frozen worker tests (tests/faults/test_amqp_frozen_worker.py).

A first execution holds until the test releases it (after it froze and thawed the worker
running it); later executions answer at once. Each execution is counted
(probe.record_execution) and announced on the list worker_fault_tools.started_key names,
with its pid and parent pid. The module is not among the rig's FAULT_TOOL_MODULES: its
limit (FROZEN_LIMIT_S) is above the rig's, which on Redis would lengthen every recovery.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time

import redis

from tests.faults import probe
from tests.faults.worker_fault_tools import announce
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

# The tool limit of the frozen worker tests: a call outlives a freeze of its worker
# (3 heartbeat timeouts) and the rerun, and stays unanswered until it is run again.
FROZEN_LIMIT_S = 20.0
# A held first execution answers by then if the test never releases it.
HOLD_MAX_S = 15.0
POLL_S = 0.05


def released_key(prefix: str) -> str:
    """Set by the test: every held first execution answers."""
    return f"{prefix}:probe:frozen:released"


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def _start(tool_name: str, call_id: str) -> int:
    """Count and announce an execution of the call; which one it is."""
    execution = probe.record_execution(call_id)
    announce(tool_name, call_id, execution)
    return execution


def _released() -> bool:
    client, prefix = _client()
    return bool(client.exists(released_key(prefix)))


@tool(timeout_s=FROZEN_LIMIT_S)
def fz_hold_once(tool_context: ToolContext) -> dict[str, int]:
    """Holds its first execution until released; answers its next ones at once."""
    execution = _start("fz_hold_once", tool_context.function_call_id)
    deadline = time.monotonic() + HOLD_MAX_S
    while execution == 1 and not _released() and time.monotonic() < deadline:
        time.sleep(POLL_S)  # ok: the tool under test holds its call
    return {"execution": execution, "pid": os.getpid()}


@tool(timeout_s=FROZEN_LIMIT_S)
async def fz_hold_once_io(tool_context: ToolContext) -> dict[str, int]:
    """Holds its first execution until released; answers its next ones at once."""
    execution = _start("fz_hold_once_io", tool_context.function_call_id)
    deadline = time.monotonic() + HOLD_MAX_S
    # The release is a key in Redis, set by the test: nothing in this process to await.
    while execution == 1 and not _released() and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(POLL_S)  # ok: the tool under test holds its call
    return {"execution": execution, "pid": os.getpid()}


@tool(timeout_s=FROZEN_LIMIT_S)
def fz_busy(seconds: float, tool_context: ToolContext) -> dict[str, int]:
    """Runs `seconds` on a prefork pool process.

    Args:
        seconds: How long it runs.
    """
    execution = _start("fz_busy", tool_context.function_call_id)
    time.sleep(seconds)  # ok: simulated work
    return {"execution": execution, "pid": os.getpid()}


@tool(timeout_s=FROZEN_LIMIT_S)
async def fz_busy_io(seconds: float, tool_context: ToolContext) -> dict[str, int]:
    """Runs `seconds` on an io worker's event loop.

    Args:
        seconds: How long it runs.
    """
    execution = _start("fz_busy_io", tool_context.function_call_id)
    await asyncio.sleep(seconds)  # ok: simulated work
    return {"execution": execution, "pid": os.getpid()}


@tool
def fz_echo(text: str) -> str:
    """Echoes the text (a call that just works).

    Args:
        text: What to echo.
    """
    return text


@tool
async def fz_echo_io(text: str) -> str:
    """Echoes the text on an io worker.

    Args:
        text: What to echo.
    """
    return text


TOOLS = [fz_hold_once, fz_hold_once_io, fz_busy, fz_busy_io, fz_echo, fz_echo_io]
