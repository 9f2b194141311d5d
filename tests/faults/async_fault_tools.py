"""Tools of the async time-limit fault test: a coroutine tool stopped by its soft limit.

A worker process keeps one event loop for its coroutine tools. `af_late_effect` sleeps
past its limit and then records a side effect; `af_give_loop_time` keeps the loop running
long enough for a task the first call left on it to wake up. Both record in Redis, under
the test's key prefix (the worker's TOOLFLEET_* variables), what the test checks.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time

import redis

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

LATE_LIMIT_S = 1.0
# Past its limit, and past the time its soft limit is answered: the tool would wake up
# while the next call runs on the same loop. (Its hard limit, 2 s, never comes: the call
# ends at the soft one.)
LATE_SLEEP_S = 2.0
# The second call keeps the loop busy past the first one's wake-up (within the rig's 3 s).
SECOND_CALL_S = 2.0


def started_key(prefix: str) -> str:
    return f"{prefix}:probe:af:started"


def cancelled_key(prefix: str, call_id: str) -> str:
    return f"{prefix}:probe:af:cancelled:{call_id}"


def effect_key(prefix: str, call_id: str) -> str:
    return f"{prefix}:probe:af:effect:{call_id}"


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


@tool(timeout_s=LATE_LIMIT_S)
async def af_late_effect(tool_context: ToolContext) -> dict[str, bool]:
    """Sleeps past its time limit, then records a side effect (it must never get there)."""
    client, prefix = _client()
    call_id = tool_context.function_call_id
    entry = {"call_id": call_id, "pid": os.getpid(), "at": time.time()}
    client.rpush(started_key(prefix), json.dumps(entry))
    try:
        await asyncio.sleep(LATE_SLEEP_S)  # ok: the tool under test overruns on purpose
    except asyncio.CancelledError:
        client.rpush(cancelled_key(prefix, call_id), time.time())
        raise
    client.rpush(effect_key(prefix, call_id), json.dumps({**entry, "at": time.time()}))
    return {"late": True}


@tool
async def af_give_loop_time(seconds: float) -> dict[str, int]:
    """Keeps this process's event loop running for `seconds`; answers with its pid.

    Args:
        seconds: How long to keep the loop running.
    """
    await asyncio.sleep(seconds)  # ok: the loop runs meanwhile, as in any long async tool
    return {"pid": os.getpid()}


TOOLS = [af_late_effect, af_give_loop_time]


def late_then_second_agent() -> Agent:
    """One turn: the overrunning call, then (next model step) a call on the same loop."""
    script = [
        call(Call("af_late_effect", {})),
        call(Call("af_give_loop_time", {"seconds": SECOND_CALL_S})),
        say("done"),
    ]
    return Agent(name="async_fault_agent", tools=TOOLS, model=ScriptedModel(script))
