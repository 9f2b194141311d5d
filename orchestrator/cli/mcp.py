"""`toolfleet mcp serve`: serve the fleet's tools to any MCP client."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from toolfleet.orchestrator.cli.launch import load_agent
from toolfleet.shared import event_loop
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.redis_check import check_redis


def cmd_mcp_serve(args: argparse.Namespace) -> None:
    """Serve the tools of `--agent` (or of the `--tools` modules) over stdio or streamable
    HTTP; each call runs on the workers serving its pool (TOOLFLEET_REDIS_URL's fleet)."""
    try:
        from toolfleet.orchestrator.mcpserve import Catalog, serve_mcp
        from toolfleet.orchestrator.mcpserve.serving import check_loopback
    except ImportError as exc:
        raise ConfigError(
            f"`toolfleet mcp serve` needs: pip install 'toolfleet[mcp]' ({exc})"
        ) from exc
    if bool(args.agent) == bool(args.tools):
        raise ConfigError("toolfleet mcp serve: pass one of --agent module:attribute or --tools")
    if args.transport == "http":
        check_loopback(args.host)
    settings = Settings()
    check_redis(settings.require_redis_url())
    if args.agent:
        catalog = Catalog.of_agent(load_agent(args.agent), args.app)
    else:
        catalog = Catalog.of_modules(args.tools.split(","), args.app)
    # stdout carries the protocol over stdio: logs go to stderr (logging's default).
    logging.getLogger().setLevel(logging.INFO if args.verbose else logging.WARNING)
    event_loop.run(serve_mcp(catalog, settings, args.transport, args.host, args.port), settings)


def add_mcp_commands(sub: Any) -> None:
    """`toolfleet mcp serve` under the `toolfleet` parser's subcommands."""
    mcp = sub.add_parser("mcp", help="MCP: serve the fleet's tools to MCP clients")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    serve = mcp_sub.add_parser("serve", help="serve tools as an MCP server (stdio or HTTP)")
    serve.add_argument("--agent", help="module:attribute of an Agent whose tools to serve")
    serve.add_argument("--tools", help="comma-separated tool modules whose tools to serve")
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP: loopback address to bind")
    serve.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765)")
    serve.add_argument("--app", default="mcp", help="app name the calls run under (default mcp)")
    serve.set_defaults(func=cmd_mcp_serve)
