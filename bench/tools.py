"""The benchmark's tools, as toolfleet tools (workers import this module).

The work itself is in bench.workload, shared with the raw Celery and ADK references.
"""

from __future__ import annotations

from bench import workload
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool, ToolOptions, tool


@tool
def noop() -> dict[str, bool]:
    """Does nothing and answers at once."""
    return workload.noop()


@tool
def sleep_ms(ms: int) -> dict[str, int]:
    """Blocks its worker slot for `ms` milliseconds (a slow API or database call).

    Args:
        ms: How long, in milliseconds.
    """
    return workload.sleep_ms(ms)


@tool
def sync_io_a(ms: int) -> dict[str, int]:
    """A blocking call (a slow API).

    Args:
        ms: How long it blocks, in milliseconds.
    """
    return workload.sleep_ms(ms)


@tool
def sync_io_b(ms: int) -> dict[str, int]:
    """Another blocking call (a database query).

    Args:
        ms: How long it blocks, in milliseconds.
    """
    return workload.sleep_ms(ms)


@tool(kind="cpu")  # figure 6 runs all four tools on one prefork pool; figure 7 the io pool
async def async_io(ms: int) -> dict[str, int]:
    """A non-blocking call (async HTTP).

    Args:
        ms: How long it waits, in milliseconds.
    """
    return await workload.async_sleep_ms(ms)


@tool
def cpu_bound(iterations: int) -> dict[str, int]:
    """Pure-Python computation that holds the GIL.

    Args:
        iterations: Rounds of work.
    """
    return workload.cpu_work(iterations)


def open_ticket(name: str) -> dict[str, str]:
    """Opens a ticket that is completed later (by the benchmark, through Redis).

    Args:
        name: What the ticket is about.
    """
    return {"status": "pending", "ticket": name}


open_ticket_tool = LongRunningFunctionTool(open_ticket)


# Figure 7: the same 1 s waits on an io pool (threads, one event loop per process) and, for
# reference, the async one on today's prefork pool.
async_io_on_io = FunctionTool(async_io.func, "async_io_on_io", ToolOptions(kind="io"))
async_io_on_prefork = FunctionTool(async_io.func, "async_io_on_prefork", ToolOptions(kind="cpu"))
sleep_on_io = FunctionTool(sleep_ms.func, "sleep_on_io", ToolOptions(kind="io"))
