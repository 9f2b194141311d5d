"""The fleet's tools as an MCP server (the SDK's low-level Server), over stdio or
streamable HTTP: tools/list offers the catalog, tools/call runs the call on the fleet.

A long-running tool answers with its pending result and its `call_id`; the extra tool
`toolfleet_result` hands over the final result once it was posted (the SDK has no tasks
extension to map it to). A call that needs a person's confirmation answers pending the
same way and is not sent: once a person confirmed it (`toolfleet tickets approve`, the
HTTP API, the approvals page), `toolfleet_result` sends it and hands over its result;
rejected, it hands over the rejection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from mcp.server.lowlevel import Server
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from toolfleet.orchestrator.mcpserve.catalog import Catalog
from toolfleet.orchestrator.mcpserve.final_results import Confirmed, FinalResults
from toolfleet.orchestrator.mcpserve.fleet_calls import FleetCalls
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.shared.redaction import redact_deep

log = logging.getLogger(__name__)

RESULT_TOOL = "toolfleet_result"
RESULT_TOOL_DECLARATION = Tool(
    name=RESULT_TOOL,
    description=(
        "The final result of a tool call that answered 'pending' (long-running, or "
        "awaiting a person's confirmation) with a call_id. Returns {'status': 'pending', "
        "...} or {'status': 'awaiting_confirmation', ...} while it is not in yet; call it "
        "again later. Once returned, a final result is forgotten."
    ),
    input_schema={
        "type": "object",
        "properties": {"call_id": {"type": "string", "description": "The pending call's id."}},
        "required": ["call_id"],
    },
)


class FleetMcpServer:
    """Answers MCP tool requests from the catalog and the fleet."""

    def __init__(
        self,
        catalog: Catalog,
        calls: FleetCalls,
        finals: FinalResults,
        secret_names: list[str],
    ) -> None:
        self._catalog = catalog
        self._calls = calls
        self._finals = finals
        self._secrets = secret_names

    def lowlevel(self) -> Server[Any]:
        """The SDK's server with our handlers."""
        return Server("toolfleet", on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        """Every tool of the catalog, declared as to the model, and `toolfleet_result`."""
        tools = await self._catalog.tools()
        declared = [
            Tool(name=t.name, description=t.description, input_schema=t.parameters_json_schema)
            for t in tools.values()
        ]
        return ListToolsResult(tools=[*declared, RESULT_TOOL_DECLARATION])

    async def call_tool(self, ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        """Run the call on the fleet; an unknown tool or failed call is an error result."""
        args = dict(params.arguments or {})
        if params.name == RESULT_TOOL:
            found = await asyncio.to_thread(self._finals.fetch, str(args.get("call_id", "")))
            if isinstance(found, Confirmed):  # a person confirmed it: sent now, once
                tool = (await self._catalog.tools()).get(found.waiting.tool)
                sent = await self._calls.run_confirmed(tool, found.waiting, found.answer)
                return self._result(sent)
            return self._answer(found, is_error=found.get("status") == "error")
        tools = await self._catalog.tools()
        tool = tools.get(params.name)
        if tool is None:
            available = ", ".join(sorted(tools)) or "none"
            return _error(f"UnknownTool: no tool {params.name!r}; available: {available}")
        return self._result(await self._calls.run(tool, args))

    def _result(self, result: ToolResult) -> CallToolResult:
        response = dict(result.response)
        if result.status is CallStatus.PENDING:
            response = {
                **response,
                "call_id": result.call_id,
                "get_final_result": f"call {RESULT_TOOL} with this call_id",
            }
        return self._answer(response, is_error=result.status is CallStatus.ERROR)

    def _answer(self, response: dict[str, Any], *, is_error: bool) -> CallToolResult:
        shown = redact_deep(response, self._secrets)
        if is_error:
            return _error(f"{shown.get('error_type', 'Error')}: {shown.get('error_message', '')}")
        text = json.dumps(shown, default=str)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=shown
        )


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
