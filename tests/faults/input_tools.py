"""Tools of the bad-input and security fault tests."""

from __future__ import annotations

import functools
import hashlib
import json

import redis

from tests.faults.probe import record_execution
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import LongRunningFunctionTool, tool


@tool
def typed_echo(text: str, count: int, tool_context: ToolContext) -> dict[str, object]:
    """Counts its execution, then echoes `text` `count` times.

    Args:
        text: What to echo.
        count: How many times.
    """
    record_execution(tool_context.function_call_id)
    return {"echo": [text] * count}


@tool
def big_result(size: int, tool_context: ToolContext) -> dict[str, object]:
    """Counts its execution, then returns `size` bytes of text.

    Args:
        size: How many characters to return.
    """
    record_execution(tool_context.function_call_id)
    return {"blob": "x" * size}


@tool
def use_secret(api_key: str, note: str, tool_context: ToolContext) -> dict[str, object]:
    """Uses a secret: returns it under a secret-named key and its length.

    Args:
        api_key: The secret.
        note: Something to echo.
    """
    record_execution(tool_context.function_call_id)
    return {"note": note, "length": len(api_key), "token": api_key, "nested": {"secret": api_key}}


def open_ticket(subject: str, tool_context: ToolContext) -> dict[str, object]:
    """Opens a ticket whose final result is posted later.

    Args:
        subject: What the ticket is about.
    """
    record_execution(tool_context.function_call_id)
    return {"status": "pending", "subject": subject}


ticket_tool = LongRunningFunctionTool(open_ticket)


@tool
def gated(name: str, tool_context: ToolContext) -> dict[str, object]:
    """Counts its execution, then waits (under its time limit) for the test to open `name`.

    Args:
        name: The gate to wait for.
    """
    record_execution(tool_context.function_call_id)
    opened = wait_for_gate(name, timeout_s=2.5)
    return {"gate": name, "opened": opened}


@functools.cache
def _gate_client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return redis.Redis.from_url(settings.require_redis_url()), settings.key_prefix


def gate_key(prefix: str, name: str) -> str:
    return f"{prefix}:probe:gate:{name}"


def wait_for_gate(name: str, timeout_s: float) -> bool:
    """Block until the test pushes to the gate (BLPOP), at most `timeout_s`."""
    client, prefix = _gate_client()
    return client.blpop([gate_key(prefix, name)], timeout=timeout_s) is not None


@tool
def use_nested_secret(auth: dict[str, str], password: str, note: str) -> dict[str, object]:
    """Uses secrets given at any depth; returns their digest and secrets of its own.

    Args:
        auth: Holds `api_key`.
        password: A second secret.
        note: Something to echo.
    """
    digest = hashlib.sha256(f"{auth['api_key']}|{password}".encode()).hexdigest()
    made = auth["api_key"].replace("NESTED", "RESULT")  # a secret the tool returns
    return {"note": note, "digest": digest, "token": made, "nested": {"secret": made}}


def open_secret_ticket(auth: dict[str, str], subject: str) -> dict[str, object]:
    """Opens a ticket with a nested secret; its final result is posted later.

    Args:
        auth: Holds `api_key`.
        subject: What the ticket is about.
    """
    return {"status": "pending", "subject": subject, "length": len(auth["api_key"])}


secret_ticket_tool = LongRunningFunctionTool(open_secret_ticket)


def state_canaries(seed: str) -> dict[str, str]:
    """The secret values `remember_secret_state` writes for `seed`."""
    names = ("password", "token", "api_key", "user", "temp")
    return {name: f"CANARY-STATE-{name.upper()}-{seed}" for name in names}


def state_digest(values: list[object]) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


@tool
def remember_secret_state(seed: str, tool_context: ToolContext) -> dict[str, object]:
    """Writes secrets to state: at the top, nested, in a list, in the user scope, as temp:.

    Args:
        seed: Makes the values unique.
    """
    values = state_canaries(seed)
    state = tool_context.state
    state["password"] = values["password"]
    nested = {"token": values["token"]}
    state["cfg"] = {"nested": nested, "keys": [{"api_key": values["api_key"]}], "region": "eu"}
    state["user:secret"] = values["user"]
    state["temp:token"] = values["temp"]
    return {"stored": sorted(state.delta)}


@tool
def recall_secret_state(tool_context: ToolContext) -> dict[str, object]:
    """Reads back what `remember_secret_state` wrote: a digest of it, never the values."""
    state = tool_context.state
    cfg = state.get("cfg", {})
    read = [
        state.get("password"),
        cfg.get("nested", {}).get("token"),
        cfg.get("keys", [{}])[0].get("api_key"),
        state.get("user:secret"),
        cfg.get("region"),
    ]
    return {"digest": state_digest(read), "temp_left": "temp:token" in state}


@tool
def deep_result(levels: int, into_state: bool, tool_context: ToolContext) -> dict[str, object]:
    """Counts its execution, then returns (or writes to state) an object `levels` deep.

    Args:
        levels: How deep the object nests.
        into_state: Write it to state key `plan` instead of returning it.
    """
    record_execution(tool_context.function_call_id)
    top: dict[str, object] = {}
    inner = top
    for _ in range(levels - 1):
        inner["k"] = {}
        inner = inner["k"]  # type: ignore[assignment]
    if into_state:
        tool_context.state["plan"] = top
        return {"written": True}
    return top
