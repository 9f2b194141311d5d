"""What a remote MCP server's failing or oversized answer does to a call of the MCP
toolset on a worker: the credential sent is masked in the error, and a long-running
call's result the poster refuses still gets a final answer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.mcp_support import serve_http_process, stdio_params
from tests.unit.test_mcp_toolset import MCP_AUTH, call, close_worker_sessions, tools_of
from toolfleet.shared.auth import CredentialStore, new_credential_key
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys
from toolfleet.shared.mcp_tools import McpToolset, StreamableHTTPConnectionParams
from toolfleet.shared.messages import CallStatus

__all__ = ["close_worker_sessions"]  # the autouse fixture: sessions closed on the call loop

# An MCP server whose tool fails with a protocol error (MCPError, passed through by the
# SDK's MCPServer) that quotes the Authorization header it got.
ECHOING_SERVER = """
import sys
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("echo-errors", log_level="WARNING")

@server.tool()
def check(ctx: Context) -> str:
    got = (ctx.headers or {}).get("authorization")
    raise MCPError(code=-32001, message=f"credential {got} is not valid for this tenant")

server.run("streamable-http", port=int(sys.argv[1]))
"""


@pytest.fixture
def echoing_server() -> Iterator[StreamableHTTPConnectionParams]:
    with serve_http_process(["-c", ECHOING_SERVER]) as served:
        yield served


def test_a_protocol_error_echoing_the_users_credential_is_masked(
    echoing_server: StreamableHTTPConnectionParams, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a user's stored credential for an HTTP MCP server
    store = CredentialStore(fakeredis.FakeRedis(), Keys("t"), new_credential_key())
    store.put("app", "u", MCP_AUTH, "tok-SECRET-123")
    tools = tools_of(McpToolset(connection_params=echoing_server, auth=MCP_AUTH))

    # When the server answers the call with a JSON-RPC error quoting what it was sent
    result = call(tools["check"], {}, ToolServices(credentials=store))

    # Then the model's error response must not hold the credential (docs: "What was sent
    # is masked in results, errors and progress")
    assert result.status is CallStatus.ERROR
    assert "tok-SECRET-123" not in result.response["error_message"], result.response
    # nor the worker's log (its traceback of the failure)
    assert "tok-SECRET-123" not in caplog.text


def test_a_long_running_result_over_the_payload_limit_still_answers_the_call(
    tmp_path: Path,
) -> None:
    # Given a long-running MCP tool, and the worker's real result poster (Completions,
    # with its TOOLFLEET_MAX_PAYLOAD_BYTES check), recording each attempt
    completions = Completions.of(fakeredis.FakeRedis(), Keys("t"), Settings())
    attempts: list[tuple[dict[str, Any], bool, BaseException | None]] = []
    final_posted = threading.Event()  # a final answer went out

    def post_result(call_id: str, response: dict[str, Any], *, final: bool = True) -> None:
        try:  # the poster's own check of what it is given (the call is not pending here)
            completions._check_size(call_id, "the result", response, final=final, source="worker")
        except BaseException as exc:
            attempts.append((response, final, exc))
            raise
        else:
            attempts.append((response, final, None))
        if final:
            final_posted.set()

    toolset = McpToolset(
        connection_params=stdio_params(tmp_path / "starts"), long_running_tools=["shout_loud"]
    )
    tool = tools_of(toolset)["shout_loud"]

    # When the server's text is within max_result_chars (200,000) but its JSON is not
    # within 256 KiB (a quote is two bytes of JSON)
    started = call(tool, {"text": '"', "times": 200_000}, ToolServices(post_result=post_result))
    assert started.status is CallStatus.PENDING
    assert final_posted.wait(60), [repr(exc) for *_, exc in attempts]

    # Then the call is answered all the same: refused, its final answer says why (else
    # it waits for good: TOOLFLEET_SESSION_TTL_S, its turn or MCP client never answered)
    (refused, answered) = [(r, exc) for r, final, exc in attempts if final]
    assert "over the 262144-byte limit" in str(refused[1])
    assert answered[1] is None and answered[0]["error_type"] == "ResultRejected"
