"""`toolfleet mcp serve`: the fleet's tools as an MCP server (stdio or streamable HTTP)."""

from toolfleet.orchestrator.mcpserve.catalog import Catalog
from toolfleet.orchestrator.mcpserve.serving import serve_mcp

__all__ = ["Catalog", "serve_mcp"]
