"""How to reach an MCP server: a command to start (stdio) or a URL (streamable HTTP).

The names and fields follow ADK's connection params. Each knows its `key` (what makes two
sessions interchangeable: a worker process reuses one session per key) and builds the
SDK's transport; the protocol itself is the `mcp` SDK's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from toolfleet.shared.errors import ConfigError

try:
    import httpx2
    from mcp import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
except ImportError as exc:  # an optional part: say how to get it
    raise ConfigError(
        f"McpToolset needs the MCP SDK ({exc}): pip install 'toolfleet[mcp]'"
    ) from exc

__all__ = [
    "ConnectionParams",
    "StdioConnectionParams",
    "StdioServerParameters",
    "StreamableHTTPConnectionParams",
]


@dataclass(frozen=True)
class StdioConnectionParams:
    """An MCP server that a worker process starts as a subprocess and talks to on stdio.

    Args:
        server_params: The command, its arguments, environment and working directory.
        timeout: Seconds to wait for the server to start and answer the handshake.
    """

    server_params: StdioServerParameters
    timeout: float = 10.0

    def key(self, headers: Mapping[str, str]) -> str:
        """What identifies the server process (stdio has no headers)."""
        return _digest("stdio", self.server_params.model_dump(mode="json"))

    def describe(self) -> str:
        """The server, for messages (the command only: its env may hold secrets)."""
        return f"stdio server {self.server_params.command!r}"

    def transport(self, headers: Mapping[str, str]) -> Any:
        """The SDK's Client argument: it starts the subprocess."""
        return self.server_params


@dataclass(frozen=True)
class StreamableHTTPConnectionParams:
    """An MCP server at a streamable HTTP URL.

    Args:
        url: The endpoint, e.g. "https://mcp.example.com/mcp".
        headers: Sent with every request (read on each process, e.g. from its environment);
            per-user credentials come from the toolset's `auth` instead.
        timeout: Seconds to connect and to write a request.
        sse_read_timeout: Seconds to wait for the next event of a response stream.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    sse_read_timeout: float = 300.0

    def key(self, headers: Mapping[str, str]) -> str:
        """The URL and every header sent (a per-user token makes a session of its own)."""
        return _digest("http", {"url": self.url, "headers": {**self.headers, **headers}})

    def describe(self) -> str:
        """The server, for messages (no headers: they may hold secrets)."""
        return f"MCP server {self.url}"

    def transport(self, headers: Mapping[str, str]) -> Any:
        """The SDK's streamable HTTP transport, with our headers and timeouts."""
        client = create_mcp_http_client(
            headers={**self.headers, **headers},
            timeout=httpx2.Timeout(self.timeout, read=self.sse_read_timeout),
        )
        return _http_transport(self.url, client)


@asynccontextmanager
async def _http_transport(url: str, client: httpx2.AsyncClient) -> AsyncIterator[Any]:
    # The SDK leaves a client it was given open: close it with the transport.
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


ConnectionParams = StdioConnectionParams | StreamableHTTPConnectionParams


def _digest(kind: str, value: Any) -> str:
    # A digest, not the value: the key is kept in memory and may be logged; headers are secret.
    blob = json.dumps(value, sort_keys=True, default=str).encode()
    return f"{kind}:{hashlib.sha256(blob).hexdigest()[:24]}"
