"""Tools of the fleet-wide limit tests: each records, from inside, when it ran.

`lim_slot` (max_concurrency=2, a prefork pool) appends its start and end times to a list
(the worker's host clock: the test's own) and announces its start; its first execution
of the call named `hang` blocks until the test kills its worker. `lim_rate` (an io tool,
rate_limit 3 per 2 s) appends its start time and pid; `lim_slot_io` (an io tool,
max_concurrency=2) its start and end; `lim_overrun` (a sync io tool, max_concurrency=1)
its start and end, past its time limit.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time

import redis

from tests.faults import probe
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

SLOTS = 2
RUN_S = 0.4  # long enough that calls overlap when nothing holds them apart
HANG_S = 60.0  # longer than the test: the first execution of `hang` waits to be killed
RATE_COUNT = 3
RATE_PERIOD_S = 2.0
# Waits count against a call's limit: room for them (the longest limit sets the redelivery).
LIMIT_S = 8.0


def runs_key(prefix: str, tool_name: str) -> str:
    """List of JSON {call_id, start, end?, pid, ppid}: one per execution's start and end."""
    return f"{prefix}:probe:limits:{tool_name}"


def started_key(prefix: str, tool_name: str) -> str:
    return f"{prefix}:probe:limits:started:{tool_name}"


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def _record(tool_name: str, **entry: object) -> None:
    client, prefix = _client()
    client.rpush(runs_key(prefix, tool_name), json.dumps(entry))


@tool(max_concurrency=SLOTS, timeout_s=LIMIT_S)
def lim_slot(name: str, tool_context: ToolContext) -> dict[str, object]:
    """Runs a moment, holding one of the fleet's slots.

    Args:
        name: Which call this is ("hang" blocks on its first execution).
    """
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    started = time.time()
    where = {"call_id": call_id, "pid": os.getpid(), "ppid": os.getppid()}
    _record("lim_slot", start=started, execution=execution, **where)
    client, prefix = _client()
    client.rpush(started_key(prefix, "lim_slot"), json.dumps({"name": name, **where}))
    time.sleep(HANG_S if name == "hang" and execution == 1 else RUN_S)  # ok: its work
    _record("lim_slot", start=started, end=time.time(), execution=execution, **where)
    return {"name": name, "execution": execution}


@tool(rate_limit=f"{RATE_COUNT}/{RATE_PERIOD_S:g}s", timeout_s=LIMIT_S)
async def lim_rate(n: int, tool_context: ToolContext) -> dict[str, int]:
    """Starts no faster than its rate.

    Args:
        n: Which call this is.
    """
    _record("lim_rate", start=time.time(), call_id=tool_context.function_call_id, pid=os.getpid())
    await asyncio.sleep(0.05)  # ok: the tool's own work
    return {"n": n}


@tool(max_concurrency=SLOTS, timeout_s=LIMIT_S)
async def lim_slot_io(n: int, tool_context: ToolContext) -> dict[str, int]:
    """Runs a moment on an io worker, holding one of the fleet's slots.

    Args:
        n: Which call this is.
    """
    started = time.time()
    await asyncio.sleep(RUN_S)  # ok: the tool's own work
    where = {"call_id": tool_context.function_call_id, "pid": os.getpid()}
    _record("lim_slot_io", start=started, end=time.time(), **where)
    return {"n": n}


# A sync io tool that runs past its time limit: answered TimeoutError at the limit, its
# thread runs on.
OVERRUN_LIMIT_S = 0.5
OVERRUN_S = 3.0  # past the limit by room for a second turn to come meanwhile


@tool(max_concurrency=1, timeout_s=OVERRUN_LIMIT_S, kind="io")
def lim_overrun(n: int, tool_context: ToolContext) -> dict[str, int]:
    """Runs past its time limit, holding the fleet's one slot.

    Args:
        n: Which call this is.
    """
    started = time.time()
    where = {"call_id": tool_context.function_call_id, "pid": os.getpid()}
    client, prefix = _client()
    client.rpush(started_key(prefix, "lim_overrun"), json.dumps({"n": n, **where}))
    time.sleep(OVERRUN_S)  # ok: the tool's own (too long) work
    _record("lim_overrun", start=started, end=time.time(), **where)
    return {"n": n}


TOOLS = [lim_slot, lim_rate, lim_slot_io, lim_overrun]
