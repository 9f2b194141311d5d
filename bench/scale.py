"""Figure 4: the orchestrator at scale - many concurrent sessions of parallel-call turns."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import io
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench import tools as bench_tools
from bench.context import Context
from bench.harness import (
    BenchModel,
    CpuMeter,
    LoopLag,
    cpu_groups,
    cpu_note,
    rss_bytes,
    start_toolfleet,
    summary_ms,
    toolfleet_workers,
)
from bench.overhead import close_runner, open_runner
from bench.report import Table, ratio
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, Step, say
from toolfleet.orchestrator.models.protocol import function_calls, text_of
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import CallStatus

OUT_DIR = Path(__file__).resolve().parent / "out"


def scale_model(calls: int, ms: int) -> BenchModel:
    return BenchModel(
        [Step(calls=[Call("sleep_ms", {"ms": ms}) for _ in range(calls)]), say("done")]
    )


STALL_S = 30.0  # no turn finished for this long while sessions still run: a hang


@dataclass
class Outcome:
    ids: list[str]
    latencies: list[float] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    stuck: int = 0  # sessions cancelled by the watchdog
    stall_dump: str | None = None
    elapsed: float = 0.0  # start -> last turn answered (a stall's wait is not counted)
    cpu_at_progress: tuple[dict[str, float], float] | None = None


async def run_sessions(
    runner: Runner, sessions: int, turns: int, meter: CpuMeter | None = None
) -> Outcome:
    """Every session runs `turns` turns back to back, all sessions at once.

    A watchdog cancels what is left if no turn finishes for STALL_S seconds, after
    writing every task's stack to bench/out/ (a benchmark must report a hang, not hang).
    """
    out = Outcome([f"scale-{i}-{uuid.uuid4().hex[:10]}" for i in range(sessions)])
    last_progress = time.monotonic()
    last_turn = time.perf_counter()

    async def session(session_id: str) -> None:
        nonlocal last_progress, last_turn
        for turn in range(turns):
            started = time.perf_counter()
            async for _ in runner.run(user_id="u", session_id=session_id, message=f"turn {turn}"):
                pass
            if out.stall_dump is not None:
                return  # a stuck turn let go by the watchdog's cancel: not a measurement
            last_turn = time.perf_counter()
            out.latencies.append(last_turn - started)
            last_progress = time.monotonic()

    tasks = [asyncio.create_task(session(s), name=f"session {s}") for s in out.ids]

    async def watchdog() -> None:
        seen = last_progress
        while True:
            await asyncio.sleep(1.0)
            if meter is not None and last_progress != seen:
                seen = last_progress  # the CPU reading to keep if everything stalls now
                out.cpu_at_progress = meter.sample()
            if time.monotonic() - last_progress > STALL_S:
                out.stall_dump = dump_tasks()
                for task in tasks:
                    if not task.done():
                        out.stuck += 1
                        task.cancel()
                return

    started = time.perf_counter()
    guard = asyncio.create_task(watchdog())
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    out.elapsed = last_turn - started
    guard.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await guard
    out.failures = [
        o
        for o in outcomes
        if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)
    ]
    return out


def dump_tasks() -> str:
    """Every asyncio task's stack, written to bench/out/stall-<time>.txt; returns the path."""
    buffer = io.StringIO()
    for task in asyncio.all_tasks():
        buffer.write(f"--- {task.get_name()}\n")
        task.print_stack(limit=30, file=buffer)
    path = OUT_DIR / f"stall-{time.strftime('%Y%m%d-%H%M%S')}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buffer.getvalue())
    return str(path)


@dataclass
class Audit:
    counts: dict[str, int]
    # Where a call's time went, from the stored events and the workers' own timestamps.
    phases: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))


async def audit(
    store: SessionStore, app_name: str, ids: list[str], turns: int, calls: int
) -> Audit:
    """Per call id in the stored sessions: how many function responses it got; and per
    turn, where the time went (before dispatch, queued, running, until stored)."""
    expected = len(ids) * turns * calls
    lost = duplicated = errors = answered_turns = made = 0
    phases: dict[str, list[float]] = collections.defaultdict(list)
    for session_id in ids:
        session = await store.get(session_key(app_name, "u", session_id))
        responses: collections.Counter[str] = collections.Counter()
        call_ids: list[str] = []
        asked_at = called_at = 0.0
        for event in session.events:
            if event.content is None:
                continue
            if event.author == "user" and text_of(event.content):
                asked_at = event.timestamp
            found = [c.id or "" for c in function_calls(event.content)]
            if found:
                called_at = event.timestamp
                phases["user message -> calls decided"].append(called_at - asked_at)
            call_ids += found
            for part in event.content.parts or ():
                if part.function_response is not None:
                    responses[part.function_response.id or ""] += 1
            errors += sum(1 for c in event.calls if c.status is CallStatus.ERROR)
            if event.calls and called_at:
                for record in event.calls:
                    phases["calls decided -> worker starts (queue)"].append(
                        record.started_at - called_at
                    )
                    phases["worker runs the tool"].append(record.finished_at - record.started_at)
                last = max(r.finished_at for r in event.calls)
                phases["last call done -> responses stored"].append(event.timestamp - last)
            if event.author != "user" and text_of(event.content) == "done":
                answered_turns += 1
        lost += sum(1 for c in call_ids if responses[c] == 0)
        duplicated += sum(1 for c in call_ids if responses[c] > 1)
        made += len(call_ids)
    counts = {
        "expected_calls": expected,
        "calls": made,
        "lost": lost,
        "duplicated": duplicated,
        "error_responses": errors,
        "answered_turns": answered_turns,
    }
    return Audit(counts, phases)


async def traced_heap(runner: Runner, sessions: int, turns: int) -> dict[str, float]:
    """Python heap per session in flight: a second pass under tracemalloc (slower, so
    not the timed one), peak and left-over traced bytes over the number of sessions."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await run_sessions(runner, sessions, turns)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"peak": (peak - base) / sessions, "kept": (current - base) / sessions}


def scale(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    sessions, turns, calls = sizes.scale_sessions, sizes.scale_turns, sizes.scale_calls
    floor_s = sizes.scale_ms / 1000
    slots = sizes.scale_processes * sizes.scale_threads
    agent = Agent(name="bench_agent", tools=[bench_tools.sleep_ms])
    group = toolfleet_workers(ctx.settings, pool_impl="threads")
    try:
        start_toolfleet(group, sizes.scale_processes, sizes.scale_threads, "scale")
        runner = ctx.aio.run(open_runner(ctx, agent, scale_model(calls, sizes.scale_ms)))
        try:
            ctx.aio.run(run_sessions(runner, 20, 1))  # warm-up
            gc.collect()
            rss_before = rss_bytes()
            redis_before = ctx.redis_memory()
            lag = LoopLag(sample_rss=True)

            meter = CpuMeter(cpu_groups(ctx.redis_url, workers=group.workers))

            async def measured() -> Outcome:
                async with lag:
                    return await run_sessions(runner, sessions, turns, meter)

            meter.start()
            outcome = ctx.aio.run(measured())
            # After a stall, the CPU used up to the last progress (not the 30 s wait).
            cpu = meter.stop(outcome.cpu_at_progress if outcome.stuck else None)
            ids, latencies, failures, elapsed = (
                outcome.ids,
                outcome.latencies,
                outcome.failures,
                outcome.elapsed,
            )
            rss_after = rss_bytes()
            redis_after = ctx.redis_memory()
            audited = ctx.aio.run(audit(runner.store, runner.app_name, ids, turns, calls))
            counts = audited.counts
            heap = ctx.aio.run(traced_heap(runner, sizes.scale_mem_sessions, turns))
        finally:
            ctx.aio.run(close_runner(runner))
    finally:
        group.stop()

    total_calls = sessions * turns * calls
    capacity = total_calls / elapsed
    latency = summary_ms(latencies) if latencies else {"p50": float("nan"), "p99": float("nan")}
    lag_ms = lag.stats_ms()
    peak_per_session = (lag.peak_rss - rss_before) / sessions
    kept_per_session = (rss_after - rss_before) / sessions
    redis_per_session = (redis_after - redis_before) / sessions
    raw_tput = ctx.shared.get("raw_throughput", {})
    raw_best = max((max(v) for v in raw_tput.values()), default=None)
    queue_floor_ms = (
        max(floor_s, sessions * calls / raw_best) * 1000 if raw_best else None
    )  # one wave of calls at raw Celery's measured no-op rate
    table = Table(
        key="scale",
        title=(
            f"4. Orchestrator at scale: {sessions:,} concurrent sessions x {turns} turns x "
            f"{calls} parallel calls of a {sizes.scale_ms} ms tool"
        ),
        columns=["measure", "value", "reference", "ratio"],
        goal=(
            "no lost or duplicated responses (0 and 0), and every session's every turn "
            "answered (no session hung)"
        ),
    )
    floor_ms = floor_s * 1000
    table.rows = [
        ["turn latency p50 ms", latency["p50"], floor_ms, ratio(latency["p50"], floor_ms)],
        ["turn latency p99 ms", latency["p99"], floor_ms, ratio(latency["p99"], floor_ms)],
        ["turn latency p50 ms vs the capacity floor", latency["p50"], queue_floor_ms,
         ratio(latency["p50"], queue_floor_ms) if queue_floor_ms else None],
        ["calls/s through the fleet", capacity, raw_best,
         ratio(capacity, raw_best) if raw_best else None],
        ["event-loop lag max ms (10 ms ticks)", lag_ms["max"], 10.0, None],
        ["event-loop lag p99 ms", lag_ms["p99"], None, None],
        ["garbage-collector pause max ms", lag_ms["gc_max"], None, None],
        *(
            [f"{phase}: {q} ms", summary_ms(values)[q], None, None]
            for phase, values in audited.phases.items()
            if values
            for q in ("p50", "p99")
        ),
        [
            f"orchestrator Python heap peak per session in flight KiB (tracemalloc, "
            f"{sizes.scale_mem_sessions} sessions)",
            heap["peak"] / 1024, None, None,
        ],
        ["orchestrator Python heap left per session KiB", heap["kept"] / 1024, None, None],
        ["orchestrator RSS growth per session KiB", peak_per_session / 1024, None, None],
        ["Redis used_memory per session KiB", redis_per_session / 1024, None, None],
        ["lost responses (a call id without a response)", counts["lost"], 0, None],
        ["duplicated responses", counts["duplicated"], 0, None],
        ["error responses (timeouts, failures)", counts["error_responses"], 0, None],
        ["turns answered", counts["answered_turns"], sessions * turns, None],
        ["calls made", counts["calls"], counts["expected_calls"], None],
        ["sessions that raised", len(failures), 0, None],
        ["sessions stuck (no progress for 30 s, cancelled)", outcome.stuck, 0, None],
        ["wall time s", elapsed, None, None],
    ]  # fmt: skip
    table.met = (
        counts["lost"] == 0
        and counts["duplicated"] == 0
        and not failures
        and not outcome.stuck
        and counts["answered_turns"] == sessions * turns
    )
    table.data = {
        "latency_ms": latency,
        "loop_lag_ms": lag_ms,
        "rss_before": rss_before,
        "rss_peak": lag.peak_rss,
        "rss_after": rss_after,
        "redis_before": redis_before,
        "redis_after": redis_after,
        "orchestrator_peak_bytes_per_session": peak_per_session,
        "orchestrator_kept_bytes_per_session": kept_per_session,
        "heap_bytes_per_session": heap,
        "redis_bytes_per_session": redis_per_session,
        "calls_per_s": capacity,
        "capacity_floor_ms": queue_floor_ms,
        "failures": [f"{type(f).__name__}: {f}" for f in failures[:5]],
        "stuck_sessions": outcome.stuck,
        "cpu_s": cpu,
        "phases_ms": {k: summary_ms(v) for k, v in audited.phases.items() if v},
        "stall_dump": outcome.stall_dump,
        **counts,
    }
    table.notes = [
        f"Workers: {sizes.scale_processes} processes x `-P threads -c {sizes.scale_threads}` "
        f"({slots} slots); one orchestrator process (one Runner) on the same 2 cores.",
        f"Reference for latency: the tool's own {sizes.scale_ms} ms, and the capacity floor: "
        f"one wave of {sessions * calls:,} calls at the raw Celery no-op rate measured in figure 3 "
        "(what this machine can push through any Celery setup).",
        "Memory: the orchestrator's Python heap (tracemalloc, a second pass of "
        f"{sizes.scale_mem_sessions} sessions x {turns} turns: peak while in flight, and what "
        "stays once they are done) and its RSS growth over the timed run (an underestimate "
        "when earlier figures left freed memory to reuse); Redis: used_memory after minus "
        "before the timed run (sessions stored, result streams trimmed), per session.",
        "Lost/duplicated: every function call id in the stored sessions must have exactly "
        "one function response.",
    ]
    table.notes.append("CPU ms per call: " + cpu_note(cpu, total_calls))
    if failures:
        table.notes.append(f"First failure: {type(failures[0]).__name__}: {failures[0]}")
    if outcome.stuck:
        table.notes.append(
            f"{outcome.stuck} sessions made no progress for {STALL_S:g} s and were cancelled; "
            f"every task's stack: {outcome.stall_dump} (a stuck session awaits "
            "`Runner._renew_lease` left 'cancelling': see bench/HISTORY.md, lease renewer)"
        )
    return table
