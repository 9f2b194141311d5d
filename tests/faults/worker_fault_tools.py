"""Tools of the worker fault tests (pool child and worker kills, crashes, timeouts).

Each tool counts its executions (probe.record_execution) and announces each start on a
list the test blocks on (`started_key`): call id, execution, pid and parent pid (the
worker's main process), so the test knows what to kill and when. Time limits stay at
the rig's default or below: the longest limit a worker knows sets the broker's
visibility timeout, hence `recovery_bound_s`.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_postrun

from tests.faults import probe
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, Script, ScriptedModel, call, say
from toolfleet.shared.call_signing import call_fields
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

# Longer than any limit here: a tool "blocks" until killed (or its soft limit).
BLOCK_S = 60.0
OVERRUN_LIMIT_S = 1.0
# After its soft limit, `wf_overrun` waits this long at most for the test's release,
# then answers anyway: still before the hard limit (soft + 1 s) kills it.
OVERRUN_LATE_S = 0.5


def started_key(prefix: str, tool_name: str) -> str:
    return f"{prefix}:probe:started:{tool_name}"


def release_key(prefix: str, call_id: str) -> str:
    return f"{prefix}:probe:release:{call_id}"


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def announce(tool_name: str, call_id: str, execution: int, **extra: object) -> None:
    """Announce an execution of the call on its tool's started list (started_key)."""
    client, prefix = _client()
    entry = {
        "call_id": call_id,
        "execution": execution,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "at": time.time(),
        **extra,
    }
    client.rpush(started_key(prefix, tool_name), json.dumps(entry))


def _block() -> None:
    time.sleep(BLOCK_S)  # ok: the tool under test blocks until the test kills it


@tool
def wf_hang_once(tool_context: ToolContext) -> dict[str, int]:
    """Blocks on its first execution (the test kills it there); answers on the next."""
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    announce("wf_hang_once", call_id, execution)
    if execution == 1:
        _block()
    return {"execution": execution, "pid": os.getpid()}


@tool
def wf_crash_worker(tool_context: ToolContext) -> str:
    """Kills its own worker process on every execution."""
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    announce("wf_crash_worker", call_id, execution)
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@tool(timeout_s=OVERRUN_LIMIT_S)
def wf_overrun(tool_context: ToolContext) -> dict[str, Any]:
    """Runs past its time limit: swallows the soft limit, answers late (before the hard one)."""
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    announce("wf_overrun", call_id, execution)
    try:
        _block()
    except SoftTimeLimitExceeded:
        client, prefix = _client()
        # The test releases it once the orchestrator has answered the call at its deadline.
        client.blpop([release_key(prefix, call_id)], timeout=OVERRUN_LATE_S)
    return {"late": True, "execution": execution}


@tool
def wf_charge(account: str, tool_context: ToolContext) -> dict[str, Any]:
    """Charges an account once per call id, then blocks on its first execution (killed there).

    Args:
        account: The account to charge.
    """
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    applied = probe.apply_side_effect_once(call_id, f"charge:{account}")
    announce("wf_charge", call_id, execution, applied=applied)
    if execution == 1:
        _block()  # killed after the side effect, before the tool returns
    return {"account": account, "charged_now": applied, "execution": execution}


@tool
def wf_echo(text: str) -> str:
    """Echoes the text (a call that just works).

    Args:
        text: What to echo.
    """
    return text


TOOLS = [wf_hang_once, wf_crash_worker, wf_overrun, wf_charge, wf_echo]


def one_call(tool_name: str, args: dict[str, Any] | None = None) -> Script:
    """A script: call `tool_name` once, then say it is done."""
    return [call(Call(tool_name, args or {})), say("done")]


def fault_agent(scripts: Mapping[str, Script]) -> Agent:
    """An agent whose offline model plays the script whose pattern matches the message."""
    return Agent(name="worker_fault_agent", tools=TOOLS, model=ScriptedModel(by_message=scripts))


@tool
def wf_die_after_post(tool_context: ToolContext) -> dict[str, int]:
    """Answers at once; on its first execution its pool child then dies, after the result
    is posted and before the broker's ack (`_die_after_first_post`)."""
    return {"execution": probe.record_execution(tool_context.function_call_id)}


@task_postrun.connect
def _die_after_first_post(task: Any = None, kwargs: Mapping[str, Any] | None = None,
                          **_: Any) -> None:  # fmt: skip
    """Kill the pool child once per call of `wf_die_after_post`, once its task returned:
    the result is on the stream, the message not acknowledged."""
    if getattr(task, "name", "") != "tool.wf_die_after_post":
        return
    call_id = str(call_fields((kwargs or {}).get("call")).get("call_id"))
    client, prefix = _client()
    if client.set(f"{prefix}:probe:died-after-post:{call_id}", 1, nx=True):
        os.kill(os.getpid(), signal.SIGKILL)
