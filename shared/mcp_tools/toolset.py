"""McpToolset: an MCP server's tools, listed by the orchestrator, called on the workers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import Tool

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.http_logs import mask_http_logs
from toolfleet.shared.mcp_tools.connection import (
    ConnectionParams,
    StdioConnectionParams,
    StreamableHTTPConnectionParams,
)
from toolfleet.shared.mcp_tools.results import DEFAULT_MAX_RESULT_CHARS
from toolfleet.shared.mcp_tools.tool import McpServer, McpTool
from toolfleet.shared.tools import FunctionTool, ToolOptions
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

log = logging.getLogger(__name__)

# Tools of one server's listing we offer at most (a server is not trusted).
MAX_TOOLS = 256


class McpToolset(BaseToolset):
    """The tools of an MCP server, as ADK's McpToolset, with the calls on the fleet.

    The orchestrator lists the server's tools to declare them to the model, and keeps
    the list for `tools_ttl_s`. Each call runs on a worker (an io pool by default): every
    worker process keeps its sessions open and reuses them, so a stdio server is started
    once per process, not per call. A worker registers the tools it finds when it starts.

    Args:
        connection_params: `StdioConnectionParams` (or a bare `StdioServerParameters`)
            or `StreamableHTTPConnectionParams`.
        tool_filter: Only these tools (the server's names, made identifiers).
        tool_name_prefix: Offer every tool as "<prefix>_<name>".
        auth: The user's credential for an HTTP server, from the credential store: the
            first call asks the user for it; later calls send it as a bearer token (or,
            for "api_key", in `api_key_header`). Listing tools uses the connection's
            own headers only.
        api_key_header: The header that carries an "api_key" credential.
        tools_ttl_s: How long the orchestrator keeps the server's tool list, in seconds.
        max_result_chars: A longer text result is cut there, marked "truncated".
        long_running_tools: Tools (names before the prefix) that answer "pending" at once
            while the worker process waits for the server's result; their MCP progress
            notifications are posted as toolfleet progress, then the final result.
        long_running_timeout_s: How long such a call may take on the server, in seconds.
        require_confirmation: As for FunctionTool: True, or a function of a call's
            arguments (and `tool_context`) saying whether a person must confirm the call
            before it is sent; applies to every tool of the server.
        pool: The pool whose workers make the calls (default: the default io pool).
    """

    def __init__(
        self,
        *,
        connection_params: ConnectionParams | StdioServerParameters,
        tool_filter: list[str] | None = None,
        tool_name_prefix: str | None = None,
        auth: AuthConfig | None = None,
        api_key_header: str = "X-API-Key",
        tools_ttl_s: float = 60.0,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        long_running_tools: list[str] | None = None,
        long_running_timeout_s: float = 3600.0,
        pool: str | None = None,
        require_confirmation: bool | Callable[..., Any] = False,
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        # I/O-bound calls: many at once per worker process, on its event loop.
        self.options = ToolOptions(pool=pool, kind="io")
        if isinstance(connection_params, StdioServerParameters):
            connection_params = StdioConnectionParams(connection_params)
        if auth is not None and not isinstance(connection_params, StreamableHTTPConnectionParams):
            raise ToolDefinitionError(
                [
                    "McpToolset: auth= needs StreamableHTTPConnectionParams (a stdio server "
                    "gets its secrets through server_params.env)"
                ]
            )
        self.connection_params: ConnectionParams = connection_params
        self._server = McpServer(
            connection_params, auth, api_key_header, max_result_chars, long_running_timeout_s
        )
        self._long_running = frozenset(long_running_tools or ())
        self._ttl_s = tools_ttl_s
        self._require_confirmation = require_confirmation
        self._listed_at = -float("inf")
        self._tools: dict[str, McpTool] = {}
        self._lock: asyncio.Lock | None = None
        mask_http_logs()  # httpx's lines hold the server's URL, a key in its query maybe

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        """The server's tools, listed again once the cached list is `tools_ttl_s` old."""
        if time.monotonic() - self._listed_at >= self._ttl_s:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if time.monotonic() - self._listed_at >= self._ttl_s:
                    self._refresh(await self._list())
                    self._listed_at = time.monotonic()
        confirm = self._require_confirmation
        return [
            replace(t.as_function_tool(), options=self.options, require_confirmation=confirm)
            for t in self._tools.values()
        ]

    async def _list(self) -> list[Tool]:
        """The server's tools, through a session of its own (the orchestrator lists seldom)."""
        connection = self.connection_params
        transport = connection.transport({})
        async with asyncio.timeout(connection.timeout), Client(transport, cache=None) as client:
            tools: list[Tool] = []
            cursor: str | None = None
            while len(tools) <= MAX_TOOLS:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        if len(tools) > MAX_TOOLS:
            log.warning(
                "%s lists over %d tools: the rest are left out", connection.describe(), MAX_TOOLS
            )
        return tools[:MAX_TOOLS]

    def _refresh(self, listed: list[Tool]) -> None:
        """Keep a tool object per name while its declaration is unchanged (workers and the
        registry compare tools by object)."""
        tools: dict[str, McpTool] = {}
        for mcp_tool in listed:
            made = McpTool.of(mcp_tool, self._server, self._long_running)
            if made is None:
                continue
            if made.name in tools:
                log.warning(
                    "%s: two tools named %r; the second is left out", self.where(), made.name
                )
                continue
            old = self._tools.get(made.name)
            same = old is not None and old.declared == made.declared
            tools[made.name] = old if same and old is not None else made
        self._tools = tools

    def where(self) -> str:
        """The server, for messages."""
        return self._server.where()
