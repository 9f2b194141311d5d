"""The MCP benchmark's tools (figure 8), on the `mcpbench` io pool: the test suite's MCP
server over stdio (its `add` tool), and the same sum as a plain async tool; workers
import this module."""

from __future__ import annotations

import os
import sys

from bench.harness import REPO_ROOT
from toolfleet.shared.mcp_tools import McpToolset, StdioConnectionParams, StdioServerParameters
from toolfleet.shared.tools import tool

POOL = "mcpbench"
# Each server process appends its pid here (tests.mcp_server): the figure counts starts.
STARTS = os.environ.get("TOOLFLEET_BENCH_MCP_STARTS", "")

SERVER = StdioServerParameters(
    command=sys.executable,
    args=["-m", "tests.mcp_server", "stdio"],
    env={"MCP_TEST_STARTS": STARTS, "PYTHONPATH": str(REPO_ROOT)},
    cwd=str(REPO_ROOT),
)

mcp_bench = McpToolset(
    connection_params=StdioConnectionParams(SERVER, timeout=60),
    tool_filter=["add"],
    tool_name_prefix="bench",
    pool=POOL,
)


@tool(pool=POOL, kind="io")
async def bench_async_noop(a: int, b: int) -> int:
    """Adds two integers on the worker itself: the fleet's own cost, without MCP.

    Args:
        a: A number.
        b: Another.
    """
    return a + b
