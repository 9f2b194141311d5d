"""Figures 1 (per-call overhead) and 3 (throughput): toolfleet against raw Celery."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from typing import Any

from celery import Celery

from bench import raw_celery, workload
from bench import tools as bench_tools
from bench.context import Context
from bench.harness import (
    BenchModel,
    CpuMeter,
    LoopLag,
    cpu_groups,
    median,
    median_cpu,
    summary_ms,
)
from bench.report import Table, ratio
from bench.traced import tracing_on
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import CallStatus, ToolCall
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.executor import execute

AGENT = "bench_agent"


def noop_agent() -> tuple[Agent, BenchModel]:
    model = BenchModel([call(Call("noop")), say("done")])
    return Agent(name=AGENT, tools=[bench_tools.noop]), model


async def open_runner(ctx: Context, agent: Agent, model: BenchModel) -> Runner:
    runner = Runner(agent, ctx.settings, model=model)
    return await runner.__aenter__()


async def close_runner(runner: Runner) -> None:
    await runner.__aexit__(None, None, None)


def envelope(session_id: str, runner: Runner, tool: str = "noop") -> ToolCall:
    return ToolCall(
        call_id=f"bench-{uuid.uuid4().hex[:16]}",
        tool=tool,
        args={},
        session_id=session_id,
        app_name=AGENT,
        user_id="u",
        invocation_id=f"inv-{uuid.uuid4().hex}",
        agent=AGENT,
        reply_to=runner.keys.results(session_key(AGENT, "u", session_id)),
        dispatched_at=time.time(),
    )


async def fleet_call(runner: Runner, session_id: str, tool: FunctionTool) -> float:
    """One planned call through CeleryFleet.run: publish -> result (seconds)."""
    planned = PlannedCall(envelope(session_id, runner, tool.name), tool)
    started = time.perf_counter()
    results = [r async for r in runner.tool_runner.run([planned])]
    elapsed = time.perf_counter() - started
    # Trim the stream, as the loop does.
    await runner.tool_runner.settle(session_key(AGENT, "u", session_id))
    if len(results) != 1 or results[0].status is not CallStatus.SUCCESS:
        raise RuntimeError(f"fleet call failed: {results}")
    return elapsed


async def measure_fleet(runner: Runner, n: int) -> list[float]:
    session_id = f"fleet-{uuid.uuid4().hex}"
    return [await fleet_call(runner, session_id, bench_tools.noop) for _ in range(n)]


async def one_turn(runner: Runner, session_id: str, message: str) -> float:
    started = time.perf_counter()
    async for _ in runner.run(user_id="u", session_id=session_id, message=message):
        pass
    return time.perf_counter() - started


async def measure_turns(runner: Runner, n: int, session_turns: int) -> list[float]:
    times: list[float] = []
    session_id = ""
    for i in range(n):
        if i % session_turns == 0:
            session_id = f"turns-{uuid.uuid4().hex}"
        times.append(await one_turn(runner, session_id, f"turn {i}"))
    return times


def measure_raw(app: Celery, n: int) -> list[float]:
    task = app.tasks["bench.noop"]
    times = []
    for _ in range(n):
        started = time.perf_counter()
        task.apply_async().get(timeout=30)
        times.append(time.perf_counter() - started)
    return times


async def _async_noop() -> dict[str, bool]:
    return workload.noop()


async def measure_await(n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await _async_noop()
        times.append(time.perf_counter() - started)
    return times


def measure_execute(n: int) -> list[float]:
    call_ = ToolCall(
        call_id="x", tool="noop", args={}, session_id="s", app_name=AGENT, user_id="u",
        invocation_id="i", agent=AGENT, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip
    times = []
    for _ in range(n):
        started = time.perf_counter()
        execute(bench_tools.noop, call_, worker="bench", max_result_bytes=1 << 20)
        times.append(time.perf_counter() - started)
    return times


def per_call(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.baseline(1)
    app = raw_celery.create_app(ctx.settings)
    agent, model = noop_agent()
    runner = ctx.aio.run(open_runner(ctx, agent, model))
    paths: dict[str, list[float]] = collections.defaultdict(list)
    spans = 0
    try:
        # Warm-up: connections, imports, worker child start.
        ctx.aio.run(measure_fleet(runner, 10))
        ctx.aio.run(measure_turns(runner, 5, 5))
        measure_raw(app, 10)
        n = sizes.overhead_per_round
        for _ in range(sizes.overhead_rounds):  # alternate, so noise hits every path alike
            paths["raw"] += measure_raw(app, n)
            paths["fleet"] += ctx.aio.run(measure_fleet(runner, n))
            paths["turn"] += ctx.aio.run(measure_turns(runner, n, sizes.overhead_session_turns))
            with tracing_on() as exported:
                paths["fleet traced"] += ctx.aio.run(measure_fleet(runner, n))
                paths["turn traced"] += ctx.aio.run(
                    measure_turns(runner, n, sizes.overhead_session_turns)
                )
            spans += exported.spans
            paths["execute"] += measure_execute(n)
            paths["await"] += ctx.aio.run(measure_await(n))
    finally:
        ctx.aio.run(close_runner(runner))
        app.close()
    stats = {name: summary_ms(values) for name, values in paths.items()}
    raw = stats["raw"]
    labels = {
        "raw": "raw Celery `apply_async().get()` (reference)",
        "fleet": "**toolfleet `CeleryFleet.run`, 1 call** (compared)",
        "turn": "toolfleet Runner turn (model + session + 1 call)",
        "fleet traced": "`CeleryFleet.run`, 1 call, tracing on (orchestrator spans)",
        "turn traced": "Runner turn, tracing on (orchestrator spans)",
        "execute": "in-process `toolfleet.workers.executor.execute`",
        "await": "in-process `await tool()` (what ADK does)",
    }
    table = Table(
        key="per_call",
        title="1. Per-call overhead: no-op tool, one call at a time",
        columns=["path", "n", "p50 ms", "p95 ms", "p99 ms", "p50 ÷ raw", "p99 ÷ raw"],
        goal="toolfleet (CeleryFleet.run) p50 and p99 at or below raw Celery's",
        data={"stats_ms": stats},
    )
    for key, label in labels.items():
        s = stats[key]
        table.rows.append(
            [label, int(s["n"]), s["p50"], s["p95"], s["p99"],
             ratio(s["p50"], raw["p50"]), ratio(s["p99"], raw["p99"])]
        )  # fmt: skip
    fleet = stats["fleet"]
    table.met = fleet["p50"] <= raw["p50"] and fleet["p99"] <= raw["p99"]
    table.notes = [
        "Worker: one prefork process with 1 child for each side, same broker settings "
        "(json, acks_late, prefetch 1), same flags; rounds alternate between the paths.",
        "The compared toolfleet path is dispatch -> result of one planned call "
        "(pipelined LPUSH, result on the session's stream via one XREAD); the Runner turn "
        f"adds the scripted model, the lease, the session read and three appends "
        f"(sessions of {sizes.overhead_session_turns} turns).",
        "Tracing is off (the default) on every row but the two `tracing on` ones, whose "
        "rounds alternate with the others: the orchestrator makes its spans (invocation, "
        f"model calls, tool calls; {spans} in all) and batches them to an exporter that "
        "drops them; the worker's own spans are not on (its process is started without "
        "OTEL_* settings).",
    ]
    return table


# ---------------------------------------------------------------- 3. throughput


def raw_throughput(app: Celery, total: int, window: int) -> float:
    """Calls/s with `window` calls in flight: wait for the oldest, send one more."""
    task = app.tasks["bench.noop"]
    in_flight: collections.deque[Any] = collections.deque()
    sent = 0
    started = time.perf_counter()
    while sent < min(window, total):
        in_flight.append(task.apply_async())
        sent += 1
    while in_flight:
        in_flight.popleft().get(timeout=60)
        if sent < total:
            in_flight.append(task.apply_async())
            sent += 1
    return total / (time.perf_counter() - started)


async def session_throughput(runner: Runner, sessions: int, turns: int) -> tuple[float, LoopLag]:
    async def session(index: int) -> None:
        session_id = f"tput-{index}-{uuid.uuid4().hex}"
        for turn in range(turns):
            await one_turn(runner, session_id, f"turn {turn}")

    async with LoopLag() as lag:
        started = time.perf_counter()
        await asyncio.gather(*(session(i) for i in range(sessions)))
        elapsed = time.perf_counter() - started
    return sessions * turns / elapsed, lag


async def fleet_throughput(runner: Runner, sessions: int, turns: int) -> float:
    async def session() -> None:
        session_id = f"ftput-{uuid.uuid4().hex}"
        for _ in range(turns):
            await fleet_call(runner, session_id, bench_tools.noop)

    started = time.perf_counter()
    await asyncio.gather(*(session() for _ in range(sessions)))
    return sessions * turns / (time.perf_counter() - started)


def throughput(ctx: Context) -> Table:
    sizes = ctx.sizes
    app = raw_celery.create_app(ctx.settings)
    agent, model = noop_agent()
    total = sizes.tput_sessions * sizes.tput_turns
    table = Table(
        key="throughput",
        title=f"3. Throughput: no-op calls/s from {sizes.tput_sessions} concurrent sessions",
        columns=[
            "worker processes",
            "raw Celery calls/s (reference)",
            "toolfleet sessions calls/s",
            "÷ raw",
            "toolfleet CeleryFleet.run calls/s",
            "÷ raw",
            "orchestrator CPU ms per call (raw Celery's client)",
            "÷ raw",
            "loop lag max ms",
        ],
        goal="toolfleet sessions ≥ 1.0x raw Celery's throughput, and the orchestrator's CPU "
        "per call ≤ raw Celery's client's (medians of the rounds)",
    )
    met = True
    runs: dict[str, Any] = {}
    cpu_notes: list[str] = []
    try:
        for processes in sizes.tput_processes:
            tf, raw_workers = ctx.baseline(processes, sizes.tput_concurrency)
            groups = cpu_groups(
                ctx.redis_url, toolfleet_workers=tf.workers, raw_workers=raw_workers.workers
            )
            runner = ctx.aio.run(open_runner(ctx, agent, model))
            raw_runs, turn_runs, fleet_runs, lags = [], [], [], []
            cpu: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
            try:
                ctx.aio.run(session_throughput(runner, 10, 2))  # warm-up
                raw_throughput(app, 50, 20)
                for _ in range(sizes.tput_rounds):
                    meter = CpuMeter(groups).start()
                    raw_runs.append(raw_throughput(app, total, sizes.tput_sessions))
                    cpu["raw"].append(meter.stop())
                    meter = CpuMeter(groups).start()
                    rate, lag = ctx.aio.run(
                        session_throughput(runner, sizes.tput_sessions, sizes.tput_turns)
                    )
                    cpu["turns"].append(meter.stop())
                    turn_runs.append(rate)
                    lags.append(lag.stats_ms()["max"])
                    meter = CpuMeter(groups).start()
                    fleet_runs.append(
                        ctx.aio.run(fleet_throughput(runner, sizes.tput_sessions, sizes.tput_turns))
                    )
                    cpu["fleet"].append(meter.stop())
            finally:
                ctx.aio.run(close_runner(runner))
            raw, turns, fleet = median(raw_runs), median(turn_runs), median(fleet_runs)
            per_call = {mode: median_cpu(rounds, total) for mode, rounds in cpu.items()}
            # The client's own process: raw Celery's client, or the orchestrator.
            client_raw, client_turns = (
                per_call["raw"]["this process"],
                per_call["turns"]["this process"],
            )
            runs[str(processes)] = {
                "raw": raw_runs, "turns": turn_runs, "fleet": fleet_runs, "lag_max_ms": lags,
                "cpu_s": dict(cpu), "cpu_ms_per_call": per_call,
            }  # fmt: skip
            for mode, label in (
                ("raw", "raw Celery"),
                ("turns", "toolfleet sessions"),
                ("fleet", "CeleryFleet.run"),
            ):
                cpu_notes.append(
                    f"CPU ms per call, {processes} process(es), {label}, median of the rounds: "
                    + ", ".join(f"{name} {ms:.2f}" for name, ms in per_call[mode].items())
                )
            table.rows.append(
                [processes, raw, turns, ratio(turns, raw), fleet, ratio(fleet, raw),
                 f"{client_turns:.2f} ({client_raw:.2f})", ratio(client_turns, client_raw),
                 max(lags)]
            )  # fmt: skip
            met = met and turns >= raw and client_turns <= client_raw
    finally:
        app.close()
    ctx.shared["raw_throughput"] = {p: r["raw"] for p, r in runs.items()}
    table.met = met
    table.data = {"runs": runs, "calls_per_run": total}
    table.notes = [
        f"{total} calls per run, median of {sizes.tput_rounds} alternating runs; each worker "
        f"process is prefork with {sizes.tput_concurrency} child; client, workers and Redis "
        "share the machine's cores.",
        f"raw Celery: one client thread keeping {sizes.tput_sessions} `apply_async()` in "
        "flight (waits for the oldest with `.get()`, sends one more).",
        "toolfleet sessions: one orchestrator process, each session running one-call turns "
        "back to back (Runner: model, lease, session read/appends, dispatch, result), on the "
        "event loop `toolfleet serve` runs (TOOLFLEET_EVENT_LOOP).",
        "Orchestrator CPU: this process's user + system time while the sessions run, per "
        "call; raw Celery's client's, the same while its calls run (`os.times`).",
        *cpu_notes,
    ]
    return table
