"""Run the fleet's MCP server until it is stopped: over stdio (for a client that starts
it) or streamable HTTP on a loopback address."""

from __future__ import annotations

from typing import Literal

from toolfleet.orchestrator.mcpserve.catalog import Catalog
from toolfleet.orchestrator.mcpserve.final_results import FinalResults
from toolfleet.orchestrator.mcpserve.fleet_calls import FleetCalls
from toolfleet.orchestrator.mcpserve.server import FleetMcpServer
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError

Transport = Literal["stdio", "http"]


# The loopback names for which the MCP SDK turns on its DNS-rebinding protection (Host
# and Origin checks): without it a web page could reach the server through the browser.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def check_loopback(host: str) -> None:
    """The MCP server authenticates no caller: refuse an address beyond this machine (and
    loopback addresses the SDK does not protect from DNS rebinding)."""
    if host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"--host {host}: `toolfleet mcp serve` does not authenticate callers, so it "
            "binds to loopback only (127.0.0.1, ::1 or localhost); put an authenticating "
            "proxy in front of it to reach it from elsewhere"
        )


async def serve_mcp(
    catalog: Catalog, settings: Settings, transport: Transport, host: str, port: int
) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP)."""
    async with Replica(settings) as replica:
        sync = replica.sync_client()
        completions = Completions.of(sync, replica.keys, settings)
        finals = FinalResults(sync, replica.keys, completions, catalog.app_name, catalog.user_id)
        calls = FleetCalls(replica, catalog.app_name, catalog.user_id)
        server = FleetMcpServer(catalog, calls, finals, settings.secret_arg_names).lowlevel()
        try:
            if transport == "stdio":
                from mcp.server.stdio import stdio_server

                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                return
            import uvicorn

            check_loopback(host)
            app = server.streamable_http_app(host=host)
            config = uvicorn.Config(app, host=host, port=port, log_level="warning")
            await uvicorn.Server(config).serve()
        finally:
            await calls.close()
