"""Tools from MCP servers (stdio, and HTTP with the user's token) and an OpenAPI spec, on
the `remote` pool, for the integration tests of McpToolset, OpenAPIToolset and
`toolfleet mcp serve`.

The workers and the orchestrator read the server's start log and the pets app's URL
from the environment the tests set.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.mcp_support import stdio_params
from tests.pets_api import pets_spec
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.mcp_tools import McpToolset, StreamableHTTPConnectionParams
from toolfleet.shared.openapi import OpenAPIToolset
from toolfleet.shared.tools import FunctionTool, ToolOptions, tool
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

POOL = "remote"
STARTS = Path(os.environ.get("TOOLFLEET_TEST_MCP_STARTS", "/nonexistent/mcp-starts"))
PETS_URL = os.environ.get("TOOLFLEET_TEST_PETS_URL", "http://127.0.0.1:9")
MCP_URL = os.environ.get("TOOLFLEET_TEST_MCP_URL", "http://127.0.0.1:9/mcp")
MCP_AUTH = AuthConfig(key="mcp_test", scheme="bearer", description="A token for the MCP server.")

mcp_tools = McpToolset(
    connection_params=stdio_params(STARTS),
    tool_name_prefix="mcp",
    tool_filter=["add", "whoami", "count_up", "refuse"],
    long_running_tools=["count_up"],
    pool=POOL,
)
mcp_http = McpToolset(
    connection_params=StreamableHTTPConnectionParams(MCP_URL, timeout=20),
    tool_name_prefix="mcph",
    tool_filter=["whoami"],
    auth=MCP_AUTH,
    pool=POOL,
)
pets = OpenAPIToolset(
    spec_dict=pets_spec(PETS_URL),
    tool_name_prefix="pets",
    tool_filter=["get_pet", "get_big"],
    pool=POOL,
)
# The same API with the user's key in the query (where httpx's log line shows URLs).
PETS_AUTH = AuthConfig(key="pets_test", scheme="api_key", description="A key for the pets API.")
pets_keyed = OpenAPIToolset(
    spec_dict=pets_spec(PETS_URL, key_in="query"),
    tool_name_prefix="petsq",
    tool_filter=["get_pet"],
    auth=PETS_AUTH,
    pool=POOL,
)


@tool(pool=POOL, kind="io")
async def echo_upper(text: str) -> str:
    """Returns `text` in capitals (a plain tool served next to the remote ones).

    Args:
        text: Any text.
    """
    return text.upper()


# What `toolfleet serve` plays without a model: a tool of each kind, then an answer.
SCRIPT = [
    call(
        Call("mcp_add", {"a": 2, "b": 3}),
        Call("pets_get_pet", {"pet_id": "p1"}),
        Call("echo_upper", {"text": "hi"}),
        Call("words_reverse", {"text": "abc"}),
        Call("pets_get_big", {"size": 1_000_000}),  # over the payload limit: cut to fit
    ),
    say("done"),
]


async def reverse(text: str) -> str:
    """Returns `text` backwards (the tool of a plain toolset).

    Args:
        text: Any text.
    """
    return text[::-1]


class Words(BaseToolset):
    """A plain toolset: its own get_tools, listed without I/O."""

    def __init__(self) -> None:
        super().__init__(tool_name_prefix="words")
        self._reverse = FunctionTool(reverse, options=ToolOptions(pool=POOL, kind="io"))

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        return [self._reverse]


words = Words()

agent = Agent(
    name="remote_agent",
    instruction="Use the MCP and REST tools.",
    tools=[mcp_tools, mcp_http, pets, pets_keyed, words, echo_upper],
    offline_script=SCRIPT,
)
