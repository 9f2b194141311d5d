"""Figure 6: the same 4-call turn, run in-process by google-adk and by toolfleet's fleet.

Two sync tools of 1 s, one async tool of 0.5 s, one CPU-bound (GIL-holding) tool of
about 1 s. The ADK side runs in a subprocess (bench.adk_turn) with an interpreter that
has google-adk; toolfleet runs the turn on 4 prefork worker slots.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench import tools as bench_tools
from bench import workload
from bench.context import Context
from bench.harness import REPO_ROOT, BenchModel, median, start_toolfleet, toolfleet_workers
from bench.overhead import close_runner, open_runner
from bench.report import Table, ratio
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, call, say

ADK_VENV_PYTHON = REPO_ROOT / "bench" / "out" / "adk-venv" / "bin" / "python"
ADK_ENV = "TOOLFLEET_BENCH_ADK_PYTHON"
SETUP_HINT = (
    "python3 -m venv bench/out/adk-venv && bench/out/adk-venv/bin/pip install google-adk "
    "(google-adk pins google-genai<3, so it gets a virtualenv of its own)"
)


def adk_python(explicit: str | None) -> str | None:
    """An interpreter that can import google.adk, or None."""
    if explicit:
        return explicit
    if importlib.util.find_spec("google.adk") is not None:
        return sys.executable
    if os.environ.get(ADK_ENV):
        return os.environ[ADK_ENV]
    if ADK_VENV_PYTHON.exists():
        return str(ADK_VENV_PYTHON)
    return None


def run_adk(python: str, sizes: Any, iterations: int) -> dict[str, Any]:
    command = [
        python, "-m", "bench.adk_turn", "--cpu-iterations", str(iterations),
        "--repeat", str(sizes.adk_repeat), "--sync-ms", str(sizes.adk_sync_ms),
        "--async-ms", str(sizes.adk_async_ms),
    ]  # fmt: skip
    return _adk_json(python, command)


def _adk_json(python: str, command: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            return found
    tail = (done.stderr or done.stdout)[-1500:]
    return {"error": f"{Path(python).name} -m bench.adk_turn exited {done.returncode}: {tail}"}


def run_adk_wide(python: str, ks: list[int], ms: int, repeat: int = 1) -> dict[str, Any]:
    """ADK's wall times of `repeat` turns of k async calls of `ms` each, for each k in `ks`
    (`{"wide": {"k": [s, ...]}}`), or `{"error": ...}`."""
    command = [python, "-m", "bench.adk_turn", "--wide", *map(str, ks), "--repeat", str(repeat),
               "--async-ms", str(ms)]  # fmt: skip
    return _adk_json(python, command)


async def toolfleet_turn(runner: Runner) -> float:
    started = time.perf_counter()
    responses = 0
    async for update in runner.run(
        user_id="u", session_id=f"adk-{uuid.uuid4().hex}", message="run the four tools"
    ):
        content = getattr(update, "content", None)
        if content is not None and getattr(update, "calls", None):
            responses += sum(1 for p in content.parts or () if p.function_response)
    elapsed = time.perf_counter() - started
    if responses != 4:
        raise RuntimeError(f"toolfleet turn got {responses} responses instead of 4")
    return elapsed


def adk(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    iterations = workload.calibrate_cpu_work(sizes.adk_cpu_s)
    cpu_alone = _time_cpu(iterations)
    sync_s, async_s = sizes.adk_sync_ms / 1000, sizes.adk_async_ms / 1000
    ideal = max(sync_s, async_s, sizes.adk_cpu_s)  # the calibrated target, not a noisy reading
    table = Table(
        key="adk",
        title=(
            f"6. Against ADK in-process: one turn of 2 sync tools of {sync_s:g} s, 1 async tool "
            f"of {async_s:g} s and 1 CPU-bound tool of ~{sizes.adk_cpu_s:g} s"
        ),
        columns=["runner", "turn wall s", "÷ ADK default", "÷ ideal (longest call)"],
    )
    python = adk_python(ctx.adk_python)
    adk_result: dict[str, Any] = (
        run_adk(python, sizes, iterations)
        if python
        else {"error": f"google-adk is not installed here; to measure it: {SETUP_HINT}"}
    )

    model = BenchModel(
        [
            call(
                Call("sync_io_a", {"ms": sizes.adk_sync_ms}),
                Call("sync_io_b", {"ms": sizes.adk_sync_ms}),
                Call("async_io", {"ms": sizes.adk_async_ms}),
                Call("cpu_bound", {"iterations": iterations}),
            ),
            say("all four done"),
        ]
    )
    agent = Agent(
        name="bench_agent",
        tools=[bench_tools.sync_io_a, bench_tools.sync_io_b, bench_tools.async_io,
               bench_tools.cpu_bound],
    )  # fmt: skip
    group = toolfleet_workers(ctx.settings)
    try:
        start_toolfleet(group, 1, sizes.adk_slots, "adk")
        runner = ctx.aio.run(open_runner(ctx, agent, model))
        try:
            ctx.aio.run(toolfleet_turn(runner))  # warm-up: the children import the tools
            walls = [ctx.aio.run(toolfleet_turn(runner)) for _ in range(sizes.adk_repeat)]
        finally:
            ctx.aio.run(close_runner(runner))
    finally:
        group.stop()

    toolfleet_s = median(walls)
    adk_default = median(adk_result["default"]) if "default" in adk_result else None
    adk_pool = median(adk_result["thread_pool"]) if "thread_pool" in adk_result else None

    def row(label: str, value: float | None) -> list[Any]:
        if value is None:
            return [label, None, None, None]
        return [label, value, ratio(value, adk_default) if adk_default else None,
                ratio(value, ideal)]  # fmt: skip

    version = adk_result.get("adk_version", "?")
    table.rows = [
        row(f"ADK {version} Runner, default: tools on the event loop (reference)", adk_default),
        row(f"ADK {version} Runner + ToolThreadPoolConfig(max_workers=4)", adk_pool),
        row(f"**toolfleet, {sizes.adk_slots} prefork worker slots**", toolfleet_s),
        row("ideal: the longest call alone", ideal),
    ]
    if "error" in adk_result:
        table.skipped = f"the ADK rows: {adk_result['error']}"
    table.data = {
        "cpu_iterations": iterations,
        "cpu_alone_s": cpu_alone,
        "toolfleet_s": walls,
        "adk": adk_result,
        "ideal_s": ideal,
    }
    table.notes = [
        f"The CPU-bound tool runs {iterations:,} rounds of pure-Python arithmetic "
        f"(calibrated to {cpu_alone:.2f} s alone on one core of this machine); median of "
        f"{sizes.adk_repeat} turns each; both sides use a scripted model (no network).",
        "ADK runs every tool in the orchestrator process: by default sync tools block "
        "the event loop one after another; with its thread pool they overlap, except that "
        "the CPU-bound tool holds the GIL. toolfleet runs each call in its own worker "
        "process, so the orchestrator's loop stays free.",
    ]
    return table


def _time_cpu(iterations: int) -> float:
    started = time.perf_counter()
    workload.cpu_work(iterations)
    return time.perf_counter() - started
