"""One tool of an MCP server, as a worker runs it: through the process's open session;
a long-running one answers "pending" and posts its progress and final result."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from google.genai import types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CallToolResult, Tool

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import InvalidCompletionError, ToolError
from toolfleet.shared.mcp_tools.connection import ConnectionParams
from toolfleet.shared.mcp_tools.results import to_response
from toolfleet.shared.mcp_tools.sessions import detached, session_pool
from toolfleet.shared.messages import error_response
from toolfleet.shared.remote_auth import (
    AWAITING_CREDENTIAL,
    Secrets,
    credential_header,
    stored_credential,
)

log = logging.getLogger(__name__)

# Seconds between two progress updates of a long-running call that are posted.
MIN_PROGRESS_INTERVAL_S = 0.5
# Bounds on a tool the server declares (a server is not trusted).
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_BYTES = 64 * 1024


@dataclass(frozen=True)
class McpServer:
    """How the tools of one McpToolset reach their server, and what bounds their results."""

    connection: ConnectionParams
    auth: AuthConfig | None
    api_key_header: str
    max_result_chars: int
    long_running_timeout_s: float

    def where(self) -> str:
        """The server, for messages."""
        return self.connection.describe()

    def credentials(self, tool_context: ToolContext) -> tuple[dict[str, str], Secrets] | None:
        """The headers carrying the user's credential ({} without `auth`) and every secret
        value sent (to mask in what comes back); None after asking the user for it."""
        sent = dict(getattr(self.connection, "headers", {}))
        if self.auth is None:
            return {}, Secrets(values=tuple(sent.values()))
        token = stored_credential(tool_context, self.auth)
        if token is None:
            return None
        name, value = credential_header(self.auth, token, self.api_key_header)
        return {name: value}, Secrets(values=(*sent.values(), value, token))


class McpTool(BaseTool):
    """One tool of an MCP server; `run_async` calls it through the process's session."""

    def __init__(
        self,
        mcp_tool: Tool,
        name: str,
        declared: dict[str, Any],
        server: McpServer,
        *,
        long_running: bool = False,
    ) -> None:
        description = (mcp_tool.description or mcp_tool.title or mcp_tool.name)[
            :MAX_DESCRIPTION_CHARS
        ]
        super().__init__(name=name, description=description, is_long_running=long_running)
        self.mcp_name = mcp_tool.name
        self.declared = declared
        hints = mcp_tool.annotations
        # Safe to send again after the connection dropped mid-call: it changes nothing twice.
        self.retry_safe = bool(hints and (hints.read_only_hint or hints.idempotent_hint))
        self._server = server

    @classmethod
    def of(cls, mcp_tool: Tool, server: McpServer, long_running: frozenset[str]) -> McpTool | None:
        """The tool, or None (logged) when the server's declaration is unusable or too big."""
        name = _identifier(mcp_tool.name)
        schema = dict(mcp_tool.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)  # the SDK's model name, noise to the model
        if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
            log.warning(
                "%s: tool %r has a schema over %d bytes; left out",
                server.where(),
                name,
                MAX_SCHEMA_BYTES,
            )
            return None
        return cls(mcp_tool, name, schema, server, long_running=name in long_running)

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self.declared
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Call the tool on the server through this process's open session."""
        server = self._server
        credentials = server.credentials(tool_context)
        if credentials is None:
            return dict(AWAITING_CREDENTIAL)
        headers, secrets = credentials
        if self.is_long_running:
            detached(self._finish_later(headers, secrets, args, tool_context))
            where = server.where()
            return {"status": "pending", "message": f"running on {where}; the result follows"}

        async def log_progress(progress: float, total: float | None, message: str | None) -> None:
            # No channel for a call's progress before its result: the worker's log has it.
            log.debug(
                "%s %s: progress %s/%s %s", server.where(), self.name, progress, total, message
            )

        try:
            result = await self._call(headers, args, log_progress)
        except Exception as exc:  # the server's words may quote what was sent to it
            raise ToolError(self._failure(exc, secrets)) from None
        return to_response(result, secrets, server.max_result_chars)

    def _failure(self, exc: Exception, secrets: Secrets) -> str:
        """What the call's failure tells the model and the log: its type and message, the
        credential and headers sent masked (a server's error may quote them)."""
        said = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
        shown = secrets.mask(said)
        log.warning("%s %s failed: %s", self._server.where(), self.name, shown)
        return str(shown)

    async def _call(
        self, headers: dict[str, str], args: dict[str, Any], progress: ProgressFnT
    ) -> CallToolResult:
        return await session_pool().call_tool(
            self._server.connection,
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
        server = self._server
        last_post = -float("inf")

        async def post(response: dict[str, Any], final: bool) -> None:
            response = secrets.mask(response)
            try:  # a Redis round trip: off the loop that every call of the process shares
                await asyncio.to_thread(tool_context.post_result, response, final=final)
            except InvalidCompletionError as exc:  # the result itself: too large, too deep
                log.warning("%s %s: result refused: %s", server.where(), self.name, exc)
                if final:  # the call still gets its final answer, or it waits for good
                    refused = error_response("ResultRejected", f"the server's result: {exc}")
                    await post(refused, final=True)
            except Exception as exc:  # the call was closed meanwhile (timed out, say)
                log.warning("%s %s: result not posted: %s", server.where(), self.name, exc)

        async def post_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal last_post
            if time.monotonic() - last_post < MIN_PROGRESS_INTERVAL_S:
                return  # a chatty server would flood the completions stream
            last_post = time.monotonic()
            update = {"status": "running", "progress": progress, "total": total, "message": message}
            await post(update, final=False)

        try:
            async with asyncio.timeout(server.long_running_timeout_s):
                result = await self._call(headers, args, post_progress)
            answer = to_response(result, secrets, server.max_result_chars)
            final = answer if isinstance(answer, dict) else {"result": answer}
        except ToolError as exc:
            final = error_response("ToolError", str(exc))
        except TimeoutError:
            limit = server.long_running_timeout_s
            final = error_response("TimeoutError", f"no result within {limit:g} s")
        except Exception as exc:
            final = error_response(type(exc).__name__, self._failure(exc, secrets))
        await post(final, final=True)


def _identifier(name: str) -> str:
    """A tool name the model and Celery accept: an identifier of at most 64 characters."""
    cleaned = re.sub(r"\W+", "_", name).strip("_")[:64]
    return cleaned if cleaned.isidentifier() else f"tool_{cleaned}"[:64]
