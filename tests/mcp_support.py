"""Start the test MCP server (tests.mcp_server) over stdio or streamable HTTP, and count
its starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolfleet.orchestrator.cli.embedded import free_port
from toolfleet.shared.mcp_tools import (
    StdioConnectionParams,
    StdioServerParameters,
    StreamableHTTPConnectionParams,
)

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 20.0


def stdio_params(starts: Path) -> StdioConnectionParams:
    """The test server over stdio; each process it starts writes its pid to `starts`."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp_server", "stdio"],
        env={"MCP_TEST_STARTS": str(starts), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    return StdioConnectionParams(server, timeout=START_TIMEOUT_S)


def starts_in(path: Path) -> list[int]:
    """The pids of the server processes started so far."""
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Return once `port` accepts connections; raise if the process ends or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP test server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)  # ok: polling a port not open yet, bounded by timeout_s
    raise TimeoutError(f"the MCP test server did not listen on {port} within {timeout_s} s")


@contextmanager
def serve_mcp_http(starts: Path) -> Iterator[StreamableHTTPConnectionParams]:
    """The test server over streamable HTTP on a free port, stopped on exit."""
    with serve_http_process(
        ["-m", "tests.mcp_server", "http"], {"MCP_TEST_STARTS": str(starts)}
    ) as served:
        yield served


@contextmanager
def serve_http_process(
    args: list[str], env: dict[str, str] | None = None
) -> Iterator[StreamableHTTPConnectionParams]:
    """An MCP server over streamable HTTP: this interpreter run with `args` and a free
    port after them, stopped on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *args, str(port)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, START_TIMEOUT_S)
        yield StreamableHTTPConnectionParams(f"http://127.0.0.1:{port}/mcp", timeout=10)
    finally:
        process.terminate()
        process.wait(10)
