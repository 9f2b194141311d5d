"""Figure 7: one turn of k calls of a 1 s I/O tool on one worker host, io pool vs prefork.

toolfleet's io pool (one `toolfleet worker --pool io` process: its intake takes messages
in batches, the coroutines share one event loop) against ADK-style `asyncio.gather` in one
process, against the same io worker with Celery's own consumer (TOOLFLEET_IO_INTAKE=false)
and against the prefork pool (4 processes, as `toolfleet run` starts); and a sync
`time.sleep` tool on the io pool's threads. Wall time of the whole turn (Runner
invocation) and the worker processes' total resident memory, sampled during the turn.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from bench import tools as bench_tools
from bench import workload
from bench.context import Context
from bench.harness import BenchModel, median, toolfleet_workers, with_descendants, worker_env
from bench.overhead import close_runner
from bench.report import Table
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess, WorkerSpec
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, say
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import CallStatus

PREFORK_PROCESSES = 4  # what `toolfleet run` starts per pool


def turn_model(tool_name: str, ms: int) -> BenchModel:
    """Step 1: k calls of `tool_name`(ms), k read from the user's message ("k=8"); then text."""

    def calls(view: ScriptView) -> Step:
        k = int(view.user_text.split("=", 1)[1].split()[0])
        return Step(calls=[Call(tool_name, {"ms": ms}) for _ in range(k)])

    return BenchModel([calls, say("done")])


# ---------------------------------------------------------------- resident memory


def tree_rss_bytes(roots: Sequence[int]) -> int:
    """Resident memory of the given processes and all their descendants (psutil if
    installed, else Linux /proc)."""
    try:
        import psutil
    except ImportError:
        return _proc_tree_rss(roots)
    total = 0
    for root in roots:
        try:
            process = psutil.Process(root)
            total += sum(p.memory_info().rss for p in [process, *process.children(True)])
        except psutil.Error:
            continue
    return total


def _proc_tree_rss(roots: Sequence[int]) -> int:
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
        rss[pid] = int(statm.split()[1]) * page
    return sum(rss.get(pid, 0) for pid in with_descendants(roots, parents))


class PeakRss:
    """Samples the workers' total RSS from a thread while a turn runs; keeps the peak."""

    def __init__(self, workers: Sequence[WorkerProcess], period_s: float = 0.05) -> None:
        self._roots = [w.process.pid for w in workers]
        self._period_s = period_s
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss_bytes(self._roots))
            if self._stop.wait(self._period_s):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_bytes(self._roots))


# ---------------------------------------------------------------- the turns


async def toolfleet_turn(runner: Runner, k: int) -> float:
    """One turn of k calls, end to end; raises unless every call succeeded."""
    started = time.perf_counter()
    ok = 0
    async for update in runner.run(
        user_id="u", session_id=f"io-{uuid.uuid4().hex}", message=f"k={k} go"
    ):
        if isinstance(update, CallFinished):
            if update.result.status is not CallStatus.SUCCESS:
                raise RuntimeError(f"a call failed: {update.result.response}")
            ok += 1
    if ok != k:
        raise RuntimeError(f"a turn of {k} calls got {ok} results")
    return time.perf_counter() - started


async def gather_turn(k: int, ms: int) -> float:
    """ADK's way: the k coroutines gathered in this process."""
    started = time.perf_counter()
    await asyncio.gather(*(workload.async_sleep_ms(ms) for _ in range(k)))
    return time.perf_counter() - started


def measure(
    ctx: Context,
    settings: Settings,
    workers: Sequence[WorkerProcess],
    tool_name: str,
    k: int,
    repeat: int,
) -> tuple[list[float], int]:
    """`repeat` turns of k calls: their wall times and the workers' peak RSS."""
    tools = [bench_tools.async_io_on_io, bench_tools.async_io_on_prefork, bench_tools.sleep_on_io]
    agent = Agent(name="bench_io_agent", tools=tools)
    model = turn_model(tool_name, ctx.sizes.io_ms)
    runner = ctx.aio.run(open_runner_with(settings, agent, model))
    walls = []
    try:
        with PeakRss(workers) as rss:
            for _ in range(repeat):
                walls.append(ctx.aio.run(toolfleet_turn(runner, k)))
    finally:
        ctx.aio.run(close_runner(runner))
    return walls, rss.peak


async def open_runner_with(settings: Settings, agent: Agent, model: BenchModel) -> Runner:
    """A started Runner with `settings`."""
    runner = Runner(agent, settings, model=model)
    return await runner.__aenter__()


def io_pools(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    widest = max(max(sizes.io_ks), sizes.io_sync_k)
    settings = ctx.settings  # the orchestrator's defaults send a turn's calls at once
    seconds = sizes.io_ms / 1000
    table = Table(
        key="io",
        title=f"7. io pools: one turn of k calls of a {sizes.io_ms} ms I/O tool, one worker host",
        columns=[
            "tool",
            "k",
            "in-process gather ms (ADK)",
            "io pool turn ms",
            "io pool worker RSS MB",
            "io pool, Celery's consumer turn ms",
            "prefork turn ms",
            "prefork worker RSS MB",
        ],
        goal=(
            f"k=100 ≤ 1.2 s; k=1000 ≤ 1.5 s with ≤ 500 MB worker RSS; "
            f"sync k={sizes.io_sync_k} ≤ 1.5 s"
        ),
    )
    io = WorkerGroup(settings, extra_env=worker_env(), start_timeout_s=60.0)
    celery_consumer = settings.model_copy(update={"io_intake": False})
    consumer_io = WorkerGroup(celery_consumer, extra_env=worker_env(), start_timeout_s=60.0)
    prefork = toolfleet_workers(settings)
    met = True
    try:
        io_worker = io.start([settings.default_io_pool], widest, f"io-{uuid.uuid4().hex[:4]}")
        prefork_workers = prefork.start_all(
            [WorkerSpec([settings.default_pool], PREFORK_PROCESSES, f"pf-{uuid.uuid4().hex[:4]}")]
        )
        idle_io = tree_rss_bytes([io_worker.process.pid])
        idle_prefork = tree_rss_bytes([w.process.pid for w in prefork_workers])
        # Warm-up: each pool runs a call (imports, connections) before it is measured.
        measure(ctx, settings, [io_worker], "async_io_on_io", 1, 1)
        measure(ctx, settings, prefork_workers, "async_io_on_prefork", PREFORK_PROCESSES, 1)
        for k in sizes.io_ks:
            gathered = [ctx.aio.run(gather_turn(k, sizes.io_ms)) for _ in range(sizes.io_repeat)]
            walls, rss = measure(ctx, settings, [io_worker], "async_io_on_io", k, sizes.io_repeat)
            row: dict[str, object] = {"gather_s": gathered, "io_s": walls, "io_rss": rss}
            pf_ms: float | None = None
            pf_mb: float | None = None
            if k <= sizes.io_prefork_max_k:
                pf_walls, pf_rss = measure(
                    ctx, settings, prefork_workers, "async_io_on_prefork", k, 1
                )
                pf_ms, pf_mb = median(pf_walls) * 1000, pf_rss / 2**20
                row.update(prefork_s=pf_walls, prefork_rss=pf_rss)
            turn = median(walls)
            table.rows.append(
                ["async", k, median(gathered) * 1000, turn * 1000, rss / 2**20, None, pf_ms, pf_mb]
            )
            table.data[f"async/{k}"] = row
            if k == 100 and turn > 1.2 * seconds:
                met = False
            if k == 1000 and (turn > 1.5 * seconds or rss > 500 * 2**20):
                met = False
        k = sizes.io_sync_k
        walls, rss = measure(ctx, settings, [io_worker], "sleep_on_io", k, sizes.io_repeat)
        table.rows.append(
            ["sync sleep", k, None, median(walls) * 1000, rss / 2**20, None, None, None]
        )
        table.data[f"sync/{k}"] = {"io_s": walls, "io_rss": rss}
        if median(walls) > 1.5 * seconds:
            met = False
        # The widest turn again on two io processes of this host: one Celery consumer
        # takes messages one at a time (see the notes), two take them in parallel.
        k = max(sizes.io_ks)
        second = io.start([settings.default_io_pool], widest, f"io-{uuid.uuid4().hex[:4]}")
        walls, rss = measure(
            ctx, settings, [io_worker, second], "async_io_on_io", k, sizes.io_repeat
        )
        table.rows.append(["async, 2 io processes", k, None, median(walls) * 1000, rss / 2**20])
        table.rows[-1] += [None, None, None]
        table.data[f"async2/{k}"] = {"io_s": walls, "io_rss": rss}
        table.data["idle_rss"] = {"io": idle_io, "prefork": idle_prefork}
        io.stop()  # the same turns on an io worker that takes messages with Celery's consumer
        consumer_worker = consumer_io.start(
            [settings.default_io_pool], widest, f"io-celery-{uuid.uuid4().hex[:4]}"
        )
        measure(ctx, celery_consumer, [consumer_worker], "async_io_on_io", 1, 1)
        for row in table.rows:
            if row[0] == "async":
                k = int(str(row[1]))
                walls, _ = measure(
                    ctx, celery_consumer, [consumer_worker], "async_io_on_io", k, sizes.io_repeat
                )
                row[5] = median(walls) * 1000
                table.data[f"async/{k}"]["celery_consumer_s"] = walls
    finally:
        io.stop()
        consumer_io.stop()
        prefork.stop()
    table.met = met
    table.notes = [
        f"io pool: one worker process, `toolfleet worker --pool io -c {widest}` (its intake "
        "takes up to 64 messages per round trip into kombu's unacknowledged set; a coroutine "
        "call holds no thread: a step thread admits the calls of a take together (one round "
        "trip for their delivery counts) and starts them on the process's one event loop, "
        "and calls that end together are concluded together (one round trip for their "
        "results); sync tools get a thread each; acks and task events batched). Celery's "
        "consumer: the same worker with "
        "TOOLFLEET_IO_INTAKE=false (Celery's threads pool takes the messages). Prefork: one "
        "worker of "
        f"{PREFORK_PROCESSES} processes, as `toolfleet run` starts for a cpu pool; run only "
        f"for k ≤ {sizes.io_prefork_max_k} (k=1000 would take about "
        f"{1000 / PREFORK_PROCESSES * seconds:,.0f} s), one turn each.",
        f"Turn: the whole Runner invocation (scripted model, session writes, k calls "
        f"dispatched at once, results in call order); median of {sizes.io_repeat} turns. "
        "Gather: the k coroutines in this process.",
        "Worker RSS: resident memory of the worker's processes (main and children), the "
        "peak sampled every 50 ms over the turns of the row; idle before the runs: io "
        f"{idle_io / 2**20:.0f} MB, prefork {idle_prefork / 2**20:.0f} MB.",
        "Celery's consumer takes the k messages one at a time on one thread (BRPOP, the "
        "unacknowledged-set append of acks_late, the ack, the task events: each a Redis "
        "round trip), about 500 messages/s per process here: the reason for the intake.",
    ]
    return table
