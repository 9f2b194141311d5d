"""Figure 7b: one turn of k parallel 1 s async calls on the embedded default, against ADK.

toolfleet as `toolfleet run` starts it with no setting changed: its own embedded server,
one worker per pool of the agent (here the io pool) with the default settings, an
orchestrator (Runner) with the same settings; against google-adk's Runner in-process
(bench.adk_turn in an interpreter that has google-adk), the same scripted turns. Rounds
alternate between the two sides so that the machine's noise hits both alike.

Beside each turn, the CPU toolfleet's processes spent on it, per call (this process, the
orchestrator; its io workers; Redis), and the least turn that CPU allows on this
machine's cores (least_turn_ms).
"""

from __future__ import annotations

import contextlib
import io
import os
from contextlib import ExitStack

from bench import tools as bench_tools
from bench.adk import SETUP_HINT, adk_python, run_adk_wide
from bench.context import Context
from bench.harness import CpuMeter, child_pids, median, redis_pid
from bench.io_pools import open_runner_with, toolfleet_turn, turn_model
from bench.overhead import close_runner
from bench.report import Table, ratio
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.launch import pools_of, specs_for, start_local_fleet
from toolfleet.orchestrator.cli.main import CPU_CONCURRENCY
from toolfleet.shared.config import Settings

TOOL = "async_io_on_io"


# Variables of the benchmark's and the tests' own, not toolfleet settings.
NOT_SETTINGS = ("TOOLFLEET_BENCH_", "TOOLFLEET_TEST_")


def changed_settings() -> list[str]:
    """TOOLFLEET_* settings set in this environment: each is a setting changed."""
    return sorted(
        name
        for name in os.environ
        if name.startswith("TOOLFLEET_") and not name.startswith(NOT_SETTINGS)
    )


# The processes whose CPU a turn is measured in: this one (the orchestrator), and the
# io workers and Redis it started.
CPU_GROUPS = ("this process", "io workers", "redis")
CORES = os.cpu_count() or 1


def least_turn_ms(wait_ms: float, cpu_ms: float, cores: int = CORES) -> float:
    """The shortest a turn of calls that each wait `wait_ms` can take when they cost
    `cpu_ms` of CPU in all, on `cores` cores.

    Each call's CPU goes before its wait (sending and admitting it: done by the time the
    last call starts, at most the turn less the wait) or after it (concluding it: from
    the first call's end, at least the wait in, on). Each part fits in a window of the
    turn less the wait, spread over every core; the larger part is at least half. And
    all of the CPU fits in the turn."""
    return max(wait_ms + cpu_ms / 2 / cores, cpu_ms / cores)


def fleet_processes(redis_url: str) -> dict[str, list[int]]:
    """The embedded fleet's processes, by CPU group: the workers are this process's
    children other than the Redis server."""
    server = redis_pid(redis_url)
    workers = [pid for pid in child_pids(os.getpid()) if pid != server]
    return {"io workers": workers, "redis": [server] if server is not None else []}


def io_defaults(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    ks = sizes.wide_ks
    seconds = sizes.io_ms / 1000
    changed = changed_settings()
    table = Table(
        key="io_defaults",
        title=(
            f"7b. The embedded default, no setting changed: one turn of k parallel "
            f"{sizes.io_ms} ms async calls, against ADK in-process"
        ),
        columns=[
            "k",
            "ADK in-process turn ms",
            "toolfleet turn ms",
            "÷ ADK",
            "all answered",
            "toolfleet CPU per call µs: orchestrator / io workers / Redis",
            f"least turn that CPU allows on {CORES} cores, ms",
        ],
        goal=(
            f"k=1000 ≤ {1.5 * seconds:g} s and ≤ 0.8x ADK; k=10000 ≤ {2 * seconds:g} s "
            "(every call answered, no setting changed)"
        ),
    )
    python = adk_python(ctx.adk_python)
    agent = Agent(name="bench_wide_agent", tools=[bench_tools.async_io_on_io])
    settings = Settings().model_copy(update={"tool_modules": ["bench.tools"]})
    adk: dict[str, list[float]] = {str(k): [] for k in ks}
    ours: dict[str, list[float]] = {str(k): [] for k in ks}
    cpu: dict[str, list[dict[str, float]]] = {str(k): [] for k in ks}
    version = "?"
    errors: list[str] = []
    loads: list[float] = []
    with ExitStack() as stack:
        with contextlib.redirect_stdout(io.StringIO()):  # what `toolfleet run` says at start
            specs = specs_for(pools_of(agent, settings), settings, CPU_CONCURRENCY)
            settings = start_local_fleet(stack, settings, specs, publish_url=False)
        model = turn_model(TOOL, sizes.io_ms)
        runner = ctx.aio.run(open_runner_with(settings, agent, model))
        stack.callback(lambda: ctx.aio.run(close_runner(runner)))
        ctx.aio.run(toolfleet_turn(runner, 10))  # warm-up: imports, connections
        meter_groups = fleet_processes(settings.require_redis_url())
        for _ in range(sizes.wide_rounds):
            loads.append(os.getloadavg()[0])  # other work on the machine, per round
            for k in ks:
                if python is not None:
                    found = run_adk_wide(python, [k], sizes.io_ms)
                    version = found.get("adk_version", version)
                    if "error" in found:
                        errors.append(str(found["error"]))
                    else:
                        adk[str(k)] += found["wide"][str(k)]
                meter = CpuMeter(meter_groups).start()
                ours[str(k)].append(ctx.aio.run(toolfleet_turn(runner, k)))
                cpu[str(k)].append(meter.stop())
    met = True
    per_call: dict[str, dict[str, float]] = {}
    for k in ks:
        turn = median(ours[str(k)])
        reference = median(adk[str(k)]) if adk[str(k)] else None
        used = per_call[str(k)] = {
            group: median([r[group] for r in cpu[str(k)]]) / k * 1e6 for group in CPU_GROUPS
        }
        table.rows.append(
            [
                k,
                reference * 1000 if reference else None,
                turn * 1000,
                ratio(turn, reference) if reference else None,
                True,  # toolfleet_turn raises unless every call succeeded
                " / ".join(f"{used[group]:.0f}" for group in CPU_GROUPS),
                least_turn_ms(sizes.io_ms, k * sum(used.values()) / 1000),
            ]
        )
        if k == 1000 and (turn > 1.5 * seconds or (reference and turn > 0.8 * reference)):
            met = False
        if k == 10_000 and turn > 2 * seconds:
            met = False
    table.met = met
    if python is None:
        table.skipped = f"the ADK column: google-adk is not installed here; {SETUP_HINT}"
    elif errors:
        table.skipped = f"the ADK column: {errors[0]}"
    table.data = {
        "toolfleet_s": ours,
        "adk_s": adk,
        "adk_version": version,
        "changed": changed,
        "load_1min": loads,
        "cpu_us_per_call": per_call,
        "cores": CORES,
    }
    table.notes = [
        f"toolfleet: `toolfleet run`'s embedded default with "
        f"{'no TOOLFLEET_* variable set' if not changed else 'these set: ' + ', '.join(changed)}"
        f": its own server, the {len(specs)} worker processes it starts, the default settings "
        "(io concurrency, calls per turn and at once); a turn is the whole Runner invocation "
        "(scripted model, session writes, results in call order).",
        f"ADK {version}: `InMemoryRunner`, a scripted `BaseLlm`, the same async tool gathered "
        "in its process (its default tool execution); a warm-up turn of 10 calls first.",
        "CPU per call: each process's CPU time (user + system) over the turn, in clock "
        "ticks, divided by k. The least turn it allows: the calls' own time plus half of "
        "k x that CPU spread over every core (all of it, when that is more) - the CPU "
        "before the calls' wait and the CPU after it each fit in the turn less the wait; "
        "no scheduling of the same work is faster.",
        f"Median of {sizes.wide_rounds} rounds; each round runs ADK then toolfleet for each k. "
        f"Load average (1 min) at the rounds' starts: "
        f"{', '.join(f'{load:.1f}' for load in loads)}.",
    ]
    return table
