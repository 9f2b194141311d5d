"""Figure 8: one MCP tool call through the fleet against a direct MCP client call, and
calls per second with one stdio server, in the same run.

Direct: the `mcp` SDK's Client over stdio, one session, sequential `add` calls. Fleet:
the same call as a toolfleet tool (McpToolset on an io worker process: Celery's threads
pool, the MCP session kept open on its event loop), sent as `toolfleet mcp serve` sends
it (FleetCalls: publish, worker, result stream), sequential and then `concurrency` at
once. Rounds alternate between the two. Server starts are counted from the server's own
start log: with session reuse the worker starts one for all its calls. For contrast,
direct calls that open a new session (a new server process) each time.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client

from bench.context import Context
from bench.harness import median, summary_ms, worker_env
from bench.report import Table
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.mcpserve.fleet_calls import FleetCalls
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.tools import FunctionTool

ARGS = {"a": 20, "b": 22}
WARMUP = 5


async def _direct(server: Any, n: int) -> list[float]:
    async with Client(server, cache=None) as client:
        for _ in range(WARMUP):
            await client.call_tool("add", ARGS)
        times = []
        for _ in range(n):
            started = time.perf_counter()
            result = await client.call_tool("add", ARGS)
            times.append(time.perf_counter() - started)
            assert result.structured_content == {"result": 42}, result
        return times


async def _new_session_each(server: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with Client(server, cache=None) as client:
            await client.call_tool("add", ARGS)
        times.append(time.perf_counter() - started)
    return times


async def _fleet(calls: FleetCalls, tool: FunctionTool, n: int, concurrency: int) -> list[float]:
    times: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        result = await calls.run(tool, dict(ARGS))
        times.append(time.perf_counter() - started)
        assert result.status is CallStatus.SUCCESS, result.response
        assert result.response == {"result": 42}, result.response

    for _ in range(n // concurrency):
        await asyncio.gather(*(one() for _ in range(concurrency)))
    return times


def mcp(ctx: Context) -> Table:
    sizes = ctx.sizes
    starts = Path(tempfile.mkdtemp(prefix="toolfleet-mcpbench-")) / "starts"
    os.environ["TOOLFLEET_BENCH_MCP_STARTS"] = str(starts)  # before bench.mcp_tools loads
    from bench import mcp_tools

    settings: Settings = ctx.settings.model_copy(
        update={"tool_modules": ["bench.mcp_tools"], "io_pools": [mcp_tools.POOL]}
    )
    env = {**worker_env("threads"), "TOOLFLEET_BENCH_MCP_STARTS": str(starts)}
    group = WorkerGroup(settings, extra_env=env, start_timeout_s=60.0)
    with group:
        (worker,) = group.start_all([WorkerSpec([mcp_tools.POOL], sizes.mcp_concurrency, "mcp1")])

        async def measure() -> dict[str, Any]:
            (tool,) = await mcp_tools.mcp_bench.get_tools_with_prefix(None)
            async with Replica(settings) as replica:
                calls = FleetCalls(replica, "mcpbench", "u")
                await _fleet(calls, tool, WARMUP, 1)
                noop_tool = mcp_tools.bench_async_noop
                await _fleet(calls, noop_tool, WARMUP, 1)
                direct: list[float] = []
                fleet: list[float] = []
                noop: list[float] = []
                per_round = sizes.mcp_calls // sizes.mcp_rounds
                for _ in range(sizes.mcp_rounds):  # alternate: noise hits all alike
                    direct += await _direct(mcp_tools.SERVER, per_round)
                    fleet += await _fleet(calls, tool, per_round, 1)
                    noop += await _fleet(calls, noop_tool, per_round, 1)
                started = time.perf_counter()
                parallel = await _fleet(
                    calls, tool, sizes.mcp_parallel_calls, sizes.mcp_concurrency
                )
                parallel_s = time.perf_counter() - started
                await calls.close()
            fresh = await _new_session_each(mcp_tools.SERVER, sizes.mcp_fresh_calls)
            return {"direct": direct, "fleet": fleet, "noop": noop, "parallel": parallel,
                    "parallel_s": parallel_s, "fresh": fresh}  # fmt: skip

        got = ctx.aio.run(measure())
        # The worker's server processes, counted while they (and so their parent) run.
        worker_starts = [p for p in _starts(starts) if _child_of(p, worker.process.pid)]

    direct, fleet = summary_ms(got["direct"]), summary_ms(got["fleet"])
    noop = summary_ms(got["noop"])
    fresh = summary_ms(got["fresh"])
    fleet_calls = len(got["fleet"]) + len(got["parallel"]) + WARMUP
    tput_direct = len(got["direct"]) / sum(got["direct"])
    tput_fleet = len(got["fleet"]) / sum(got["fleet"])
    tput_parallel = len(got["parallel"]) / got["parallel_s"]
    overhead = fleet["p50"] - direct["p50"]
    table = Table(
        key="mcp",
        title="8. One MCP call (stdio server): through the fleet vs a direct MCP client",
        columns=["path", "p50 ms", "p99 ms", "calls/s", "server starts"],
        rows=[
            ["direct MCP client, one session", direct["p50"], direct["p99"], tput_direct, 1],
            ["fleet, sequential", fleet["p50"], fleet["p99"], tput_fleet, None],
            [
                "fleet, async tool without MCP (reference)",
                noop["p50"],
                noop["p99"],
                len(got["noop"]) / sum(got["noop"]),
                None,
            ],
            [
                f"fleet, {sizes.mcp_concurrency} at once",
                summary_ms(got["parallel"])["p50"],
                summary_ms(got["parallel"])["p99"],
                tput_parallel,
                len(worker_starts),
            ],
            [
                "direct, new session per call",
                fresh["p50"],
                fresh["p99"],
                len(got["fresh"]) / sum(got["fresh"]),
                len(got["fresh"]),
            ],
        ],
        notes=[
            f"overhead of the fleet per MCP call: {overhead:.2f} ms at p50 "
            f"({fleet['p50'] / direct['p50']:.1f}x the direct call); the same sum as a plain "
            f"async tool on the same io worker takes {noop['p50']:.2f} ms: the MCP call adds "
            f"{fleet['p50'] - noop['p50']:.2f} ms to the fleet's own cost",
            f"server processes of the worker's, alive after its {fleet_calls} calls: "
            f"{len(worker_starts)} (its session, reused by every call; listing its tools "
            "at start used one more, closed since)",
            "same run, rounds alternating direct/fleet; a shared 2-core machine: read ratios",
        ],
        data={
            "direct": direct,
            "fleet": fleet,
            "fresh": fresh,
            "overhead_p50_ms": overhead,
            "calls_per_s": {
                "direct": tput_direct,
                "fleet": tput_fleet,
                "fleet_parallel": tput_parallel,
            },
            "worker_server_starts": len(worker_starts),
            "fleet_calls": fleet_calls,
            "median_direct_ms": median(got["direct"]) * 1000,
        },
    )
    return table


def _starts(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _child_of(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(") ", 1)[1].split()[1]) == parent
    except (OSError, ValueError):
        return False
