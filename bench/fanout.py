"""Figure 2: one turn of k parallel calls of a 200 ms tool, against ceil(k/slots) x 200 ms."""

from __future__ import annotations

import math
import time
import uuid

from celery import Celery

from bench import raw_celery
from bench import tools as bench_tools
from bench.context import Context
from bench.harness import (
    BenchModel,
    median,
    raw_workers,
    start_raw,
    start_toolfleet,
    toolfleet_workers,
)
from bench.overhead import close_runner, open_runner
from bench.report import Table, ratio
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, say


def fanout_model(ms: int) -> BenchModel:
    """Step 1: k calls of sleep_ms(ms), k read from the user's message ("k=8"); then text."""

    def calls(view: ScriptView) -> Step:
        k = int(view.user_text.split("=", 1)[1].split()[0])
        return Step(calls=[Call("sleep_ms", {"ms": ms}) for _ in range(k)])

    return BenchModel([calls, say("done")])


async def toolfleet_turn(runner: Runner, k: int) -> tuple[float, float, float]:
    """One turn of k calls: (turn wall time, dispatch -> last result, spread of the calls'
    start times on the workers), in seconds."""
    started = time.perf_counter()
    dispatched = last = 0.0
    finished = 0
    starts: list[float] = []
    async for update in runner.run(
        user_id="u", session_id=f"fan-{uuid.uuid4().hex}", message=f"k={k} go"
    ):
        if isinstance(update, CallsDispatched):
            dispatched = time.perf_counter()
        elif isinstance(update, CallFinished):
            finished += 1
            last = time.perf_counter()
            starts.append(update.result.started_at)
    wall = time.perf_counter() - started
    if finished != k:
        raise RuntimeError(f"fan-out turn of {k} calls got {finished} results")
    return wall, last - dispatched, max(starts) - min(starts)


def raw_group(app: Celery, k: int, ms: int) -> float:
    task = app.tasks["bench.sleep_ms"]
    started = time.perf_counter()
    results = [task.apply_async((ms,)) for _ in range(k)]
    for result in results:
        result.get(timeout=60)
    return time.perf_counter() - started


def fanout(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    seconds = sizes.fanout_ms / 1000
    app = raw_celery.create_app(ctx.settings)
    agent = Agent(name="bench_agent", tools=[bench_tools.sleep_ms])
    table = Table(
        key="fanout",
        title=f"2. Fan-out: one turn of k calls of a {sizes.fanout_ms} ms tool",
        columns=[
            "slots",
            "k",
            "ideal ms (reference)",
            "toolfleet turn ms",
            "efficiency",
            "dispatch→last result ms",
            "start spread ms",
            "raw Celery k apply_async ms",
            "raw efficiency",
        ],
        goal="toolfleet efficiency (ideal ÷ turn time) ≥ 95% whenever k ≤ slots",
    )
    tf = toolfleet_workers(ctx.settings)
    raw = raw_workers(ctx.settings)
    met = True
    try:
        for slots in sizes.fanout_slots:
            per = sizes.fanout_slots_per_process
            have = len(tf.workers) * per
            if slots > have:
                more = math.ceil((slots - have) / per)
                start_toolfleet(tf, more, per, "fan")
                start_raw(raw, more, per, "rawfan")
            runner = ctx.aio.run(open_runner(ctx, agent, fanout_model(sizes.fanout_ms)))
            try:
                # Warm-up: every prefork child runs once.
                ctx.aio.run(toolfleet_turn(runner, slots))
                raw_group(app, slots, sizes.fanout_ms)
                for k in sizes.fanout_ks:
                    ideal = math.ceil(k / slots) * seconds
                    turns, inner, spreads, raws = [], [], [], []
                    for _ in range(sizes.fanout_repeat):
                        wall, dispatch_to_last, spread = ctx.aio.run(toolfleet_turn(runner, k))
                        turns.append(wall)
                        inner.append(dispatch_to_last)
                        spreads.append(spread)
                        raws.append(raw_group(app, k, sizes.fanout_ms))
                    turn, raw_t = median(turns), median(raws)
                    efficiency = ratio(ideal, turn)
                    table.rows.append(
                        [slots, k, ideal * 1000, turn * 1000, efficiency, median(inner) * 1000,
                         median(spreads) * 1000, raw_t * 1000, ratio(ideal, raw_t)]
                    )  # fmt: skip
                    table.data[f"{slots}/{k}"] = {
                        "ideal_s": ideal, "turn_s": turns, "dispatch_to_last_s": inner,
                        "start_spread_s": spreads, "raw_s": raws,
                    }  # fmt: skip
                    if k <= slots and efficiency < 0.95:
                        met = False
            finally:
                ctx.aio.run(close_runner(runner))
    finally:
        tf.stop()
        raw.stop()
        app.close()
    table.met = met
    table.notes = [
        f"Slots: prefork worker processes of {sizes.fanout_slots_per_process} children "
        "each (for both sides); median of "
        f"{sizes.fanout_repeat} turns per row. Efficiency = ideal ÷ measured.",
        "The toolfleet turn is the whole Runner invocation (scripted model, session writes, "
        "k calls dispatched at once, results in call order); dispatch→last result is the "
        "part between the CallsDispatched and the last CallFinished update; start spread is "
        "the first to the last call's start on the workers (their own clocks): how long the "
        "workers' consumers took to hand the k messages to their children.",
    ]
    return table
