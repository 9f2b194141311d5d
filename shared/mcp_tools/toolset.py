"""McpToolset: an MCP server's tools, listed by the orchestrator, called on the workers."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import replace
from typing import Any

from google.genai import types
from mcp import Client, StdioServerParameters
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CallToolResult, Tool

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError, ToolError
from toolfleet.shared.mcp_tools.connection import (
    ConnectionParams,
    StdioConnectionParams,
    StreamableHTTPConnectionParams,
)
from toolfleet.shared.mcp_tools.results import DEFAULT_MAX_RESULT_CHARS, to_response
from toolfleet.shared.mcp_tools.sessions import detached, session_pool
from toolfleet.shared.messages import error_response
from toolfleet.shared.remote_auth import (
    AWAITING_CREDENTIAL,
    Secrets,
    credential_header,
    stored_credential,
)
from toolfleet.shared.tools import FunctionTool, ToolOptions
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

log = logging.getLogger(__name__)

# Seconds between two progress updates of a long-running call that are posted.
MIN_PROGRESS_INTERVAL_S = 0.5
# Bounds on what a server's listing may make us offer (a server is not trusted).
MAX_TOOLS = 256
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_BYTES = 64 * 1024


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
        self._auth = auth
        self._api_key_header = api_key_header
        self._ttl_s = tools_ttl_s
        self._max_result_chars = max_result_chars
        self.long_running_tools = frozenset(long_running_tools or ())
        self.long_running_timeout_s = long_running_timeout_s
        self._listed_at = -float("inf")
        self._tools: dict[str, McpTool] = {}
        self._lock: asyncio.Lock | None = None

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
        return [replace(t.as_function_tool(), options=self.options) for t in self._tools.values()]

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
            made = McpTool.of(mcp_tool, self)
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
        return self.connection_params.describe()

    async def credentials(self, tool_context: ToolContext) -> tuple[dict[str, str], Secrets] | None:
        """The headers carrying the user's credential ({} without `auth`) and every secret
        value sent (to mask in what comes back); None after asking the user for it."""
        sent = dict(getattr(self.connection_params, "headers", {}))
        if self._auth is None:
            return {}, Secrets(values=tuple(sent.values()))
        token = stored_credential(tool_context, self._auth)
        if token is None:
            return None
        name, value = credential_header(self._auth, token, self._api_key_header)
        return {name: value}, Secrets(values=(*sent.values(), value, token))


class McpTool(BaseTool):
    """One tool of an MCP server; `run_async` calls it through the process's session."""

    def __init__(self, mcp_tool: Tool, name: str, declared: dict[str, Any], toolset: McpToolset):
        description = (mcp_tool.description or mcp_tool.title or mcp_tool.name)[
            :MAX_DESCRIPTION_CHARS
        ]
        long_running = name in toolset.long_running_tools
        super().__init__(name=name, description=description, is_long_running=long_running)
        self.mcp_name = mcp_tool.name
        self.declared = declared
        hints = mcp_tool.annotations
        # Safe to send again after the connection dropped mid-call: it changes nothing twice.
        self.retry_safe = bool(hints and (hints.read_only_hint or hints.idempotent_hint))
        self._toolset = toolset

    @classmethod
    def of(cls, mcp_tool: Tool, toolset: McpToolset) -> McpTool | None:
        """The tool, or None (logged) when the server's declaration is unusable or too big."""
        name = _identifier(mcp_tool.name)
        schema = dict(mcp_tool.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)  # the SDK's model name, noise to the model
        if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
            log.warning(
                "%s: tool %r has a schema over %d bytes; left out",
                toolset.where(),
                name,
                MAX_SCHEMA_BYTES,
            )
            return None
        return cls(mcp_tool, name, schema, toolset)

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self.declared
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Call the tool on the server through this process's open session."""
        toolset = self._toolset
        credentials = await toolset.credentials(tool_context)
        if credentials is None:
            return dict(AWAITING_CREDENTIAL)
        headers, secrets = credentials
        if self.is_long_running:
            detached(self._finish_later(headers, secrets, args, tool_context))
            where = toolset.where()
            return {"status": "pending", "message": f"running on {where}; the result follows"}

        async def log_progress(progress: float, total: float | None, message: str | None) -> None:
            # No channel for a call's progress before its result: the worker's log has it.
            log.debug(
                "%s %s: progress %s/%s %s", toolset.where(), self.name, progress, total, message
            )

        result = await self._call(headers, args, log_progress)
        return to_response(result, secrets, toolset._max_result_chars)

    async def _call(
        self, headers: dict[str, str], args: dict[str, Any], progress: ProgressFnT
    ) -> CallToolResult:
        return await session_pool().call_tool(
            self._toolset.connection_params,
            headers,
            self.mcp_name,
            args,
            retry_safe=self.retry_safe,
            progress=progress,
        )

    async def _finish_later(
        self,
        headers: dict[str, str],
        secrets: Secrets,
        args: dict[str, Any],
        tool_context: ToolContext,
    ) -> None:
        """A long-running call, after it answered "pending": post its progress, then its
        final result (an error response if it fails or runs out of time)."""
        toolset = self._toolset
        last_post = -float("inf")

        async def post(response: dict[str, Any], final: bool) -> None:
            response = secrets.mask(response)
            try:  # a Redis round trip: off the loop that every call of the process shares
                await asyncio.to_thread(tool_context.post_result, response, final=final)
            except Exception as exc:  # the call was closed meanwhile (timed out, say)
                log.warning("%s %s: result not posted: %s", toolset.where(), self.name, exc)

        async def post_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal last_post
            if time.monotonic() - last_post < MIN_PROGRESS_INTERVAL_S:
                return  # a chatty server would flood the completions stream
            last_post = time.monotonic()
            update = {"status": "running", "progress": progress, "total": total, "message": message}
            await post(update, final=False)

        try:
            async with asyncio.timeout(toolset.long_running_timeout_s):
                result = await self._call(headers, args, post_progress)
            answer = to_response(result, secrets, toolset._max_result_chars)
            final = answer if isinstance(answer, dict) else {"result": answer}
        except ToolError as exc:
            final = error_response("ToolError", str(exc))
        except TimeoutError:
            limit = toolset.long_running_timeout_s
            final = error_response("TimeoutError", f"no result within {limit:g} s")
        except Exception as exc:
            log.exception("%s %s failed", toolset.where(), self.name)
            final = error_response(type(exc).__name__, str(exc))
        await post(final, final=True)


def _identifier(name: str) -> str:
    """A tool name the model and Celery accept: an identifier of at most 64 characters."""
    cleaned = re.sub(r"\W+", "_", name).strip("_")[:64]
    return cleaned if cleaned.isidentifier() else f"tool_{cleaned}"[:64]
