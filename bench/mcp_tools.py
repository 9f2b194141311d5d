"""The MCP benchmark's toolset (figure 8): the test suite's MCP server over stdio, its
`add` tool on the `mcpbench` io pool; workers import this module."""

from __future__ import annotations

import os
import sys

from bench.harness import REPO_ROOT
from toolfleet.shared.mcp_tools import McpToolset, StdioConnectionParams, StdioServerParameters

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
