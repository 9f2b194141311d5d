"""McpToolset against real MCP servers the tests start (the SDK's MCPServer over stdio
and streamable HTTP): listing with a TTL, calls through the worker's executor and call
loop, session reuse, reopening a dead session, errors, bounds, credentials."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.mcp_support import serve_mcp_http, starts_in, stdio_params
from toolfleet.orchestrator.loop.confirmation import ask_confirmation
from toolfleet.shared.auth import AuthConfig, CredentialStore, new_credential_key
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys
from toolfleet.shared.mcp_tools import McpToolset, StreamableHTTPConnectionParams, sessions
from toolfleet.shared.mcp_tools.sessions import SessionPool, close_sessions
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.call_loop import call_loop
from toolfleet.workers.executor import execute

MCP_AUTH = AuthConfig(key="mcp_test", scheme="bearer")


@pytest.fixture(autouse=True)
def close_worker_sessions() -> Iterator[None]:
    yield
    # The sessions live on this process's call loop, as on a worker: close them there.
    call_loop().run(close_sessions(), 30)


@pytest.fixture
def starts(tmp_path: Path) -> Path:
    return tmp_path / "starts"


def tools_of(toolset: McpToolset) -> dict[str, FunctionTool]:
    return {t.name: t for t in toolset.all_tools()}


def envelope(tool: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(
        call_id="c1", tool=tool, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", state={}, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


def call(
    tool: FunctionTool, args: dict[str, Any], services: ToolServices | None = None
) -> ToolResult:
    return execute(
        tool,
        envelope(tool.name, args),
        worker="w",
        max_result_bytes=1_000_000,
        time_limit_s=30,
        services=services,
    ).result


def test_tools_are_listed_with_their_schemas(starts: Path) -> None:
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))

    assert sorted(tools) == ["add", "count_up", "die", "die_once", "refuse", "shout_loud", "whoami"]
    assert tools["add"].parameters_json_schema["required"] == ["a", "b"]
    assert tools["add"].parameters_json_schema["properties"]["a"]["type"] == "integer"
    assert tools["add"].description == "Add two integers."


def test_filter_and_prefix(starts: Path) -> None:
    toolset = McpToolset(
        connection_params=stdio_params(starts), tool_filter=["add"], tool_name_prefix="calc"
    )
    assert list(tools_of(toolset)) == ["calc_add"]


async def test_the_list_is_cached_for_its_ttl(starts: Path) -> None:
    cached = McpToolset(connection_params=stdio_params(starts), tools_ttl_s=3600)
    first = await cached.get_tools_with_prefix(None)
    second = await cached.get_tools_with_prefix(None)
    assert len(starts_in(starts)) == 1  # one listing, one server start
    assert [t.func for t in first] == [t.func for t in second]  # the same tools

    expiring = McpToolset(connection_params=stdio_params(starts), tools_ttl_s=0)
    await expiring.get_tools_with_prefix(None)
    again = await expiring.get_tools_with_prefix(None)
    assert len(starts_in(starts)) == 3
    assert {t.name for t in again} == {t.name for t in second}


def test_calls_reuse_one_session_per_process(starts: Path) -> None:
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))
    listing = len(starts_in(starts))

    sums = [call(tools["add"], {"a": i, "b": 1}).response for i in range(5)]
    pids = {call(tools["whoami"], {}).response["pid"] for _ in range(3)}

    assert sums == [{"result": i + 1} for i in range(5)]
    assert len(starts_in(starts)) == listing + 1  # one server for all eight calls
    assert len(pids) == 1


def test_concurrent_calls_share_the_session(starts: Path) -> None:
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))
    listing = len(starts_in(starts))

    # As an io worker's threads do: each hands its call to the process's call loop
    with ThreadPoolExecutor(10) as threads:
        results = list(threads.map(lambda i: call(tools["add"], {"a": i, "b": i}), range(20)))

    assert [r.response for r in results] == [{"result": 2 * i} for i in range(20)]
    assert len(starts_in(starts)) == listing + 1


def test_error_result_and_unknown_arguments_become_error_responses(starts: Path) -> None:
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))

    refused = call(tools["refuse"], {"reason": "no"})
    missing = call(tools["add"], {"a": 1})

    assert refused.status is CallStatus.ERROR
    assert refused.response["error_type"] == "ToolError"
    assert refused.response["error_message"].endswith("refused: no")
    assert missing.response["error_type"] == "InvalidArguments"


def test_a_server_that_died_idle_is_restarted_for_the_next_call(
    starts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given sessions probed before reuse however briefly idle
    monkeypatch.setattr(sessions, "PROBE_AFTER_IDLE_S", 0.0)
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))
    first = call(tools["whoami"], {}).response["pid"]

    os.kill(first, signal.SIGKILL)
    wait_until_gone(first)  # the session may not have seen it go yet
    result = call(tools["whoami"], {})

    assert result.status is CallStatus.SUCCESS, result.response
    assert result.response["pid"] != first


def wait_until_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Until the killed server's pipe is closed: its process is a zombie or reaped."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ")[1].startswith("Z"):
                    return
        except (FileNotFoundError, ProcessLookupError):  # reaped, before or while read
            return
        time.sleep(0.01)  # ok: polling /proc, bounded: another parent's process cannot be awaited
    raise TimeoutError(f"process {pid} still runs")


def test_a_call_the_server_dies_in_is_not_retried_unless_idempotent(
    starts: Path, tmp_path: Path
) -> None:
    tools = tools_of(McpToolset(connection_params=stdio_params(starts)))

    died = call(tools["die"], {})
    after = call(tools["add"], {"a": 2, "b": 2})
    survived = call(tools["die_once"], {"marker": str(tmp_path / "marker")})

    assert died.status is CallStatus.ERROR
    assert "may or may not have run" in died.response["error_message"]
    assert after.response == {"result": 4}  # a new session
    # die_once is marked idempotent: its call was sent again on a new session
    assert survived.status is CallStatus.SUCCESS and survived.response == {"result": "survived"}
    assert (tmp_path / "marker").exists()


def test_a_long_result_is_cut(starts: Path) -> None:
    toolset = McpToolset(connection_params=stdio_params(starts), max_result_chars=100)

    result = call(tools_of(toolset)["shout_loud"], {"text": "ab", "times": 500})

    assert result.response == {"result": "AB" * 50, "truncated": True}


def test_an_unreachable_server_is_an_error_response(starts: Path) -> None:
    with serve_mcp_http(starts) as params:
        tools = tools_of(McpToolset(connection_params=params))
    # The server is gone now
    result = call(tools["add"], {"a": 1, "b": 2})

    assert result.status is CallStatus.ERROR
    assert "http://127.0.0.1" in result.response["error_message"]


@pytest.fixture
def http_server(starts: Path) -> Iterator[StreamableHTTPConnectionParams]:
    with serve_mcp_http(starts) as params:
        yield params


def test_streamable_http_calls_reuse_the_session(
    http_server: StreamableHTTPConnectionParams,
) -> None:
    tools = tools_of(McpToolset(connection_params=http_server))

    results = [call(tools["add"], {"a": i, "b": 2}).response for i in range(3)]
    refused = call(tools["refuse"], {"reason": "over http"})

    assert results == [{"result": 2}, {"result": 3}, {"result": 4}]
    assert refused.response["error_message"].endswith("refused: over http")


def test_the_users_credential_goes_in_the_header(
    http_server: StreamableHTTPConnectionParams,
) -> None:
    store = CredentialStore(fakeredis.FakeRedis(), Keys("t"), new_credential_key())
    services = ToolServices(credentials=store)
    tools = tools_of(McpToolset(connection_params=http_server, auth=MCP_AUTH))

    asked = call(tools["whoami"], {}, services)
    store.put("app", "u", MCP_AUTH, "tok-123")
    answered = call(tools["whoami"], {}, services)

    assert asked.actions.requested_auth is not None
    assert asked.actions.requested_auth["key"] == "mcp_test"
    # The server got it; it never comes back, even echoed by the server
    assert answered.response["digest"] == hashlib.sha256(b"Bearer tok-123").hexdigest()
    assert answered.response["authorization"] == "***"
    assert answered.response["echo"] == "you sent ***"
    assert "tok-123" not in json.dumps(answered.response)


def test_a_long_running_tool_posts_progress_then_its_result(starts: Path) -> None:
    # Given count_up as a long-running tool, and a worker's result poster that records
    posted: list[tuple[str, dict[str, Any], bool]] = []
    finished = threading.Event()

    def post_result(call_id: str, response: dict[str, Any], *, final: bool = True) -> None:
        posted.append((call_id, response, final))
        if final:
            finished.set()

    toolset = McpToolset(connection_params=stdio_params(starts), long_running_tools=["count_up"])
    tool = tools_of(toolset)["count_up"]

    # When it is called, it answers pending at once
    started = call(tool, {"steps": 3}, ToolServices(post_result=post_result))
    assert tool.is_long_running
    assert started.status is CallStatus.PENDING and started.response["status"] == "pending"

    # Then the server's progress and its final result are posted for the call
    assert finished.wait(30)
    progress = [r for _, r, final in posted if not final]
    assert progress and progress[0] == {
        "status": "running", "progress": 1.0, "total": 3.0, "message": "step 1",
    }  # fmt: skip
    assert posted[-1] == ("c1", {"result": "counted 3"}, True)
    assert all(call_id == "c1" for call_id, _, _ in posted)


async def test_past_its_bound_the_least_recently_used_session_is_closed(tmp_path: Path) -> None:
    pool = SessionPool(max_sessions=1)
    one, two = stdio_params(tmp_path / "one"), stdio_params(tmp_path / "two")
    try:
        first = await pool.call_tool(one, {}, "whoami", {}, retry_safe=False)
        await pool.call_tool(two, {}, "add", {"a": 1, "b": 1}, retry_safe=False)
        again = await pool.call_tool(one, {}, "whoami", {}, retry_safe=False)
    finally:
        await pool.close()

    assert first.structured_content is not None and again.structured_content is not None
    assert again.structured_content["pid"] != first.structured_content["pid"]
    assert pool.opened == 3


async def test_require_confirmation_parks_every_call_of_the_server(starts: Path) -> None:
    # Given a toolset whose calls a person must confirm when a is large
    def needs_confirmation(**args: Any) -> bool:
        return bool(args.get("a", 0) > 10)

    toolset = McpToolset(
        connection_params=stdio_params(starts), require_confirmation=needs_confirmation
    )
    tools = {t.name: t for t in await toolset.get_tools_with_prefix(None)}

    # When the loop checks calls before sending them
    big = await ask_confirmation(tools["add"], envelope("add", {"a": 99, "b": 1}), {"a": 99})
    small = await ask_confirmation(tools["add"], envelope("add", {"a": 1, "b": 1}), {"a": 1})

    # Then the big one waits for a person, the small one is sent
    assert big is not None and big.actions.requested_confirmation is not None
    assert small is None
