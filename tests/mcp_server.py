"""A small MCP server (the SDK's MCPServer, FastMCP's successor) for the MCP tests.

`python -m tests.mcp_server stdio` serves it on stdin/stdout; `python -m tests.mcp_server
http PORT` over streamable HTTP at http://127.0.0.1:PORT/mcp. Every process appends its
pid to the file named by MCP_TEST_STARTS, so a test can count server starts.
"""

from __future__ import annotations

import hashlib
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("test-tools", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def whoami(ctx: Context) -> dict[str, object]:
    """The server process's id, and the authorization header it got (HTTP only), echoed
    and as a digest (a server that echoes a secret: the client must mask it)."""
    got = (ctx.headers or {}).get("authorization")
    digest = hashlib.sha256(got.encode()).hexdigest() if got else None
    return {"pid": os.getpid(), "authorization": got, "echo": f"you sent {got}", "digest": digest}


@server.tool()
async def count_up(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, then answer."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with `reason`."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def die() -> str:
    """Ends the server process at once (a crash, for the reconnect tests)."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def die_once(marker: str) -> str:
    """Ends the server process the first time it is called with `marker` (a file path)."""
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("died")
        os._exit(3)
    return "survived"


@server.tool(name="shout-loud")
def shout(text: str, times: int = 1) -> str:
    """`text` in capitals, `times` times."""
    return text.upper() * times


def main() -> None:
    """Serve over the transport named on the command line."""
    starts = os.environ.get("MCP_TEST_STARTS")
    if starts:
        with open(starts, "a") as f:
            f.write(f"{os.getpid()}\n")
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", port=int(sys.argv[2]))


if __name__ == "__main__":
    main()
