"""Tools of the io pool tests: many calls at once in one worker process.

`io_meet` and `io_meet_sync` wait until `n` calls of their `wave` have arrived in this
process (or give up at 2.5 s, within the rig's 3 s limit): they prove concurrency by
construction, and their results carry the worker's own timestamps and pid. `io_overrun`
outlives its limit; `io_hang_once` hangs in its first execution (the test kills the
worker), answers at once in the next. Limits stay at the rig's 3 s or below: the longest
limit a worker knows sets the broker's visibility timeout.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time

import redis

from tests.faults import probe
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

# A wave that has not met by then answers anyway (met: false): within the 3 s limit.
MEET_TIMEOUT_S = 2.5
OVERRUN_LIMIT_S = 1.0
OVERRUN_SLEEP_S = 2.5
HANG_S = 2.9  # the first execution's wait: under the limit, the test kills before

_arrived: dict[str, int] = {}
_met: dict[str, asyncio.Event] = {}  # on the process's call loop, where the tools run
_sync_met = threading.Condition()


def started_key(prefix: str, tool_name: str) -> str:
    return f"{prefix}:probe:io:started:{tool_name}"


def cancelled_key(prefix: str, call_id: str) -> str:
    return f"{prefix}:probe:io:cancelled:{call_id}"


def effect_key(prefix: str, call_id: str) -> str:
    return f"{prefix}:probe:io:effect:{call_id}"


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


@tool
async def io_meet(wave: str, n: int) -> dict[str, object]:
    """Waits until `n` calls of `wave` are running in this process.

    Args:
        wave: A name shared by the calls that wait for each other.
        n: How many calls make the wave.
    """
    _arrived[wave] = _arrived.get(wave, 0) + 1
    met = _met.setdefault(wave, asyncio.Event())
    if _arrived[wave] >= n:
        met.set()
    try:
        await asyncio.wait_for(met.wait(), MEET_TIMEOUT_S)
    except TimeoutError:
        return {"met": False, "arrived": _arrived[wave]}
    return {"met": True}


@tool(kind="io")  # a sync I/O tool: the io pool runs it on a thread
def io_meet_sync(wave: str, n: int) -> dict[str, object]:
    """Blocks its thread until `n` calls of `wave` are running in this process.

    Args:
        wave: A name shared by the calls that wait for each other.
        n: How many calls make the wave.
    """
    with _sync_met:
        _arrived[wave] = _arrived.get(wave, 0) + 1
        _sync_met.notify_all()
        met = _sync_met.wait_for(lambda: _arrived[wave] >= n, MEET_TIMEOUT_S)
        return {"met": met, "thread": threading.get_ident()}


@tool(timeout_s=OVERRUN_LIMIT_S)
async def io_overrun(tool_context: ToolContext) -> dict[str, bool]:
    """Sleeps past its time limit, then records a side effect (it must never get there)."""
    client, prefix = _client()
    call_id = tool_context.function_call_id

    async def helper() -> None:  # a task of this call: cancelled with it
        try:
            await asyncio.sleep(OVERRUN_SLEEP_S)  # ok: outlives the call on purpose
        except asyncio.CancelledError:
            client.rpush(cancelled_key(prefix, call_id), "helper")
            raise
        client.rpush(effect_key(prefix, call_id), "helper")

    helping = asyncio.create_task(helper())
    try:
        await asyncio.sleep(OVERRUN_SLEEP_S)  # ok: the tool under test overruns on purpose
    except asyncio.CancelledError:
        client.rpush(cancelled_key(prefix, call_id), "tool")
        raise
    client.rpush(effect_key(prefix, call_id), "tool")
    await helping
    return {"late": True}


@tool(timeout_s=OVERRUN_LIMIT_S, kind="io")
def io_overrun_sync(seconds: float) -> dict[str, bool]:
    """Blocks its thread for `seconds`, past its limit.

    Args:
        seconds: How long to block.
    """
    time.sleep(seconds)  # ok: the tool under test overruns on purpose
    return {"late": True}


@tool
async def io_nap(seconds: float) -> dict[str, int]:
    """Sleeps `seconds` on the event loop; answers with its pid.

    Args:
        seconds: How long to sleep.
    """
    await asyncio.sleep(seconds)  # ok: an I/O wait, as in any async tool
    return {"pid": os.getpid()}


@tool
async def io_hang_once(tool_context: ToolContext) -> dict[str, int]:
    """Hangs in its first execution (until the test kills the worker), answers in the next."""
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    client, prefix = _client()
    entry = {"call_id": call_id, "execution": execution, "pid": os.getpid(), "at": time.time()}
    client.rpush(started_key(prefix, "io_hang_once"), json.dumps(entry))
    if execution == 1:
        await asyncio.sleep(HANG_S)  # ok: the test kills the worker meanwhile
    return {"execution": execution}


class FlakyNetwork(ConnectionError):
    """What a tool's first execution raises: a transient failure worth a retry."""


@tool(retry_on=(FlakyNetwork,), max_retries=2, retry_backoff_s=0.2)
async def io_flaky_once(tool_context: ToolContext) -> dict[str, int]:
    """Fails its first execution with a transient error; answers in the retry."""
    execution = probe.record_execution(tool_context.function_call_id)
    if execution == 1:
        raise FlakyNetwork("the network dropped the first try")
    return {"execution": execution}


@tool
async def io_counted_nap(seconds: float, tool_context: ToolContext) -> dict[str, int]:
    """Records each execution, sleeps `seconds` on the event loop, answers which it was.

    Args:
        seconds: How long to sleep.
    """
    execution = probe.record_execution(tool_context.function_call_id)
    await asyncio.sleep(seconds)  # ok: an I/O wait, as in any async tool
    return {"execution": execution}
