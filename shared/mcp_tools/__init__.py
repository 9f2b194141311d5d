"""Tools of an MCP server (stdio or streamable HTTP), called on the workers through
sessions each worker process keeps open; uses the official `mcp` SDK."""

from toolfleet.shared.mcp_tools.connection import (
    StdioConnectionParams,
    StdioServerParameters,
    StreamableHTTPConnectionParams,
)
from toolfleet.shared.mcp_tools.tool import McpTool
from toolfleet.shared.mcp_tools.toolset import McpToolset

__all__ = [
    "McpTool",
    "McpToolset",
    "StdioConnectionParams",
    "StdioServerParameters",
    "StreamableHTTPConnectionParams",
]
