"""Pool kinds: which pool a tool runs on, what a worker of it starts, and how an io pool
keeps each call's limit on its threads."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support import LocalTool
from tests.unit.test_executor import envelope
from toolfleet.orchestrator.agent_tool import AgentTool
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.launch import EMBEDDED_IO_PROCESSES, specs_for
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.shared.celery_config import tool_kind, tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError, ToolDefinitionError
from toolfleet.shared.pool_kinds import concurrency_for, kind_of_pools, worker_pool_argv
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool, ToolOptions, tool
from toolfleet.workers.executor import execute

SETTINGS = Settings(redis_url="redis://unused")


def sync_tool() -> str:
    """Sync."""
    return "s"


async def async_tool() -> str:
    """Async."""
    return "a"


@pytest.mark.parametrize(
    ("made", "pool"),
    [
        (FunctionTool(sync_tool), "default"),  # sync, no kind: the default (cpu) pool
        (FunctionTool(async_tool), "io"),  # async def: the default io pool
        (tool(kind="io")(sync_tool), "io"),  # a sync I/O tool that says so
        (tool(kind="cpu")(async_tool), "default"),  # an async tool kept on prefork
        (tool(pool="heavy", kind="io")(async_tool), "heavy"),  # an explicit pool wins
        (tool(pool="heavy")(async_tool), "heavy"),
        (LongRunningFunctionTool(async_tool), "io"),
        (LongRunningFunctionTool(sync_tool, options=ToolOptions(kind="io")), "io"),
    ],
)
def test_a_tool_runs_on_its_pool_else_the_default_pool_of_its_kind(
    made: FunctionTool, pool: str
) -> None:
    assert tool_pool(made, SETTINGS) == pool


def test_the_default_io_pool_and_the_io_pools_are_io_every_other_pool_cpu() -> None:
    settings = Settings(io_pools=["io", "scrape"], default_io_pool="net")
    assert [settings.pool_kind(p) for p in ("io", "scrape", "net", "default", "x")] == [
        "io",
        "io",
        "io",
        "cpu",
        "cpu",
    ]
    assert tool_pool(FunctionTool(async_tool), settings) == "net"
    assert tool_kind(tool(pool="scrape")(sync_tool), settings) == "io"


def test_io_pools_read_from_the_environment_as_a_comma_separated_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLFLEET_IO_POOLS", "io, scrape")
    monkeypatch.setenv("TOOLFLEET_IO_CONCURRENCY", "500")
    settings = Settings()
    assert settings.io_pools == ["io", "scrape"] and settings.io_concurrency == 500


def test_an_unknown_kind_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="kind 'gpu'"):
        tool(kind="gpu")(sync_tool)  # type: ignore[arg-type]


def test_a_worker_of_io_pools_runs_threads_and_of_cpu_pools_prefork() -> None:
    io = kind_of_pools(["io"], SETTINGS)
    # Its intake runs coroutine calls without a thread each: a wide turn in one process.
    assert worker_pool_argv(io, concurrency_for(io, SETTINGS, None, 4)) == [
        "-P",
        "threads",
        "-c",
        "10000",
    ]
    assert worker_pool_argv("io", concurrency_for("io", SETTINGS, 1000, 4))[-1] == "1000"
    cpu = kind_of_pools(["default", "heavy"], SETTINGS)
    assert worker_pool_argv(cpu, concurrency_for(cpu, SETTINGS, None, 4)) == [
        "-P",
        "prefork",
        "-c",
        "4",
    ]


def test_without_the_intake_an_io_worker_runs_a_thread_per_call_up_to_io_threads() -> None:
    celery_consumer = SETTINGS.model_copy(update={"io_intake": False})
    assert concurrency_for("io", celery_consumer, None, 4) == celery_consumer.io_threads == 200
    assert concurrency_for("io", celery_consumer, 1000, 4) == 1000  # asked for: as asked


def test_one_worker_for_io_and_cpu_pools_is_refused_saying_what_to_start() -> None:
    with pytest.raises(ConfigError, match="start a worker for each kind"):
        kind_of_pools(["default", "io"], SETTINGS)


def test_the_embedded_fleet_starts_an_io_worker_when_the_agent_has_async_tools() -> None:
    child = Agent(name="child", tools=[], model=ScriptedModel([say("x")]))
    agent = Agent(
        name="a",
        tools=[sync_tool, async_tool, AgentTool(child)],
        model=ScriptedModel([say("x")]),
    )
    pools = sorted({tool_pool(t, SETTINGS) for t in agent.all_tools()})
    specs = [(tuple(s.pools), s.concurrency) for s in specs_for(pools, SETTINGS, 4)]
    # io: the settings' io concurrency (None) in each of EMBEDDED_IO_PROCESSES processes
    # (two where there are two cores); cpu pools: one worker of the processes asked for.
    io = [(("io",), None)] * EMBEDDED_IO_PROCESSES
    assert specs == [(("agents",), 4), (("default",), 4), *io]
    assert min(2, os.cpu_count() or 1) == EMBEDDED_IO_PROCESSES


# --- an io pool's threads keep each call's limit -------------------------------------------


def on_pool_threads(calls: list[tuple[Any, float]]) -> list[Any]:
    """Execute each (function, limit) on its own thread, as Celery's threads pool does."""

    def one(func: Any, limit: float) -> Any:
        made = LocalTool(func)
        return execute(
            made, envelope(made.name, {}), worker="w", max_result_bytes=10_000, time_limit_s=limit
        ).result

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda c: one(*c), calls))


def test_coroutine_calls_share_one_loop_and_each_keeps_its_own_limit() -> None:
    loops: list[int] = []
    siblings = 20

    async def slow() -> str:
        """Overruns its limit."""
        loops.append(id(asyncio.get_running_loop()))
        await asyncio.sleep(5)  # ok: cut short by its 0.2 s limit
        return "late"

    async def nap() -> str:
        """Finishes after its sibling timed out."""
        loops.append(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.5)  # ok: outlives the sibling's limit
        return "ok"

    started = time.monotonic()
    results = on_pool_threads([(slow, 0.2)] + [(nap, 5.0)] * siblings)
    took = time.monotonic() - started
    assert results[0].response["error_type"] == "TimeoutError"
    assert "0.2 s" in results[0].response["error_message"]
    assert [r.response for r in results[1:]] == [{"result": "ok"}] * siblings
    assert len(set(loops)) == 1  # one event loop for every call of the process
    assert took < 0.5 * siblings / 2  # concurrent: far from one after another


def test_a_sync_call_on_a_pool_thread_is_answered_at_its_limit() -> None:
    release = threading.Event()

    def stuck() -> str:
        """Blocks until released."""
        release.wait(10)
        return "late"

    started = time.monotonic()
    (result,) = on_pool_threads([(stuck, 0.2)])
    took = time.monotonic() - started
    release.set()  # the abandoned thread ends here, long after its call was answered
    assert result.response["error_type"] == "TimeoutError"
    assert took < 2.0


def test_a_tools_own_timeout_error_is_not_mistaken_for_its_limit() -> None:
    async def own() -> str:
        """Raises TimeoutError itself, well within its limit."""
        raise TimeoutError("upstream timed out")

    (result,) = on_pool_threads([(own, 5.0)])
    assert result.response == {
        "status": "error",
        "error_type": "TimeoutError",
        "error_message": "upstream timed out",
    }
