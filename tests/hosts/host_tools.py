"""Tools and the agent of the tests across hosts: each execution records, from inside,
which host ran it.

`where` counts its execution (probe.record_execution), appends {call_id, execution,
address, pid, start} to a list - `address` is the source address the host's kernel
picks to reach Redis, so the host's own address on the test network - works for
`seconds`, appends the same with its end, and returns the host's address.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import redis

from tests.faults import probe
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool

CALLS_PER_TURN = 4
WORK_S = 1.5  # under the rig's 3 s tool limit; long enough to be caught mid-call


def runs_key(prefix: str) -> str:
    """List of JSON {call_id, execution, address, pid, start, end?}: starts and ends."""
    return f"{prefix}:probe:hosts:runs"


@functools.cache
def _address() -> str:
    """This host's address towards Redis (a UDP connect sends nothing: routing only)."""
    settings = Settings()
    target = urlsplit(settings.require_redis_url())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((target.hostname or "127.0.0.1", target.port or 6379))
        return str(s.getsockname()[0])


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def _record(entry: dict[str, Any]) -> None:
    client, prefix = _client()
    client.rpush(runs_key(prefix), json.dumps(entry))


@tool
def where(n: int, seconds: float, tool_context: ToolContext) -> dict[str, object]:
    """Works for `seconds` and says which host it ran on.

    Args:
        n: Which call of the turn this is (echoed back).
        seconds: How long the call works.
    """
    call_id = tool_context.function_call_id
    execution = probe.record_execution(call_id)
    entry = {"call_id": call_id, "execution": execution, "address": _address()}
    entry |= {"pid": os.getpid(), "start": time.time()}
    _record(entry)
    time.sleep(seconds)  # ok: the tool's work, long enough to be cut or killed mid-call
    _record({**entry, "end": time.time()})
    return {"n": n, "address": entry["address"]}


def _summary(view: ScriptView) -> str:
    ns = sorted(int(response["n"]) for name, response in view.responses if name == "where")
    return f"finished {ns}"


# One turn of CALLS_PER_TURN calls at once, then the answer.
fan_out = Agent(
    name="fan_out",
    instruction="Run the calls.",
    tools=[where],
    offline_script=[
        call(*[Call("where", {"n": n, "seconds": WORK_S}) for n in range(CALLS_PER_TURN)]),
        say(_summary),
    ],
)
