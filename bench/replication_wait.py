"""What waiting for a replica costs: a posted completion, a worker's result, a session
write, a whole turn.

`python -m bench.replication_wait [--n 2000] [--turns 200] [--rounds 2]`, or as a figure
of the suite: `python -m bench.run --only replication`.

Starts a master, its replica and three sentinels on loopback (tests.faults.sentinels)
and times, sequentially, each acknowledged write on the `redis+sentinel://` URL with
TOOLFLEET_REDIS_WAIT_REPLICAS 0 (acknowledged by the master alone) and 1 (the default
under Sentinel), in runs that alternate between the two: `Completions.post_result` (a
202), `ResultReporter.post` (a worker's result, before its task is acked) and a fenced
session write through an orchestrator's auto-pipelined client (`Fence.run`, what a
stored turn does); then whole turns of one no-op call through one worker process
(`Runner`, an offline model), which carry every wait a call makes: the lease, the user's
message, the turn that sends the call, the worker's result and the stored responses.
Each wait has a Redis database of its own on the topology, with its own worker process
(started with the same wait) and Runner, so that both stay up while the runs alternate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import time
from collections.abc import Callable

from bench.context import Context
from bench.harness import (
    bench_settings,
    in_parallel,
    start_toolfleet,
    stop_groups,
    summary_ms,
    toolfleet_workers,
)
from bench.io_pools import open_runner_with
from bench.overhead import close_runner, measure_turns, noop_agent
from bench.report import Table, ratio
from tests.faults.sentinels import SentinelRedis
from toolfleet.orchestrator.connections import command_client
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.event_loop import loop_factory
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, PendingCall, ToolResult
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.replication import Replication, attach
from toolfleet.shared.reporting import ResultReporter

WAITS = (0, 1)  # replicas a write waits for: the reference first
SESSION_TURNS = 10  # turns per session in the turns measured
WARM_UP_TURNS = 20
MEASURES = {
    "turn": "a whole turn of one no-op call through one worker (`Runner`)",
    "completion": "a posted completion (`Completions.post_result`, a 202)",
    "result": "a worker's tool result (`ResultReporter.post`)",
    "session": "a fenced session write (`Fence.run`)",
}
# Seconds of each run, by measure, then by wait.
Runs = dict[str, dict[int, list[list[float]]]]


def _timed(n: int, one: Callable[[int], object]) -> list[float]:
    samples = []
    for i in range(n):
        started = time.perf_counter()
        one(i)
        samples.append(time.perf_counter() - started)
    return samples


def completions(settings: Settings, n: int) -> list[float]:
    client = resilient_client(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    posts = Completions.of(client, keys, settings)
    ids = [f"bench-{i}" for i in range(n)]
    for call_id in ids:
        posts.register(
            PendingCall(
                call_id=call_id,
                tool="t",
                session_id=call_id,
                app_name="bench",
                user_id="u",
                agent="bench",
                invocation_id="i",
                ticket={"status": "pending"},
                created_at=time.time(),
            )
        )
    try:
        return _timed(n, lambda i: posts.post_result(ids[i], {"status": "done"}))
    finally:
        client.close()


def results(settings: Settings, n: int) -> list[float]:
    client = resilient_client(settings.require_redis_url())
    reporter = ResultReporter(client, 10_000, replication=Replication.of(settings))
    stream = f"{settings.key_prefix}:bench:results"

    def post(i: int) -> None:
        result = ToolResult(
            call_id=f"c{i}",
            tool="t",
            session_id="s",
            invocation_id="i",
            status=CallStatus.SUCCESS,
            response={"ok": i},
        )
        reporter.post(stream, result)

    try:
        return _timed(n, post)
    finally:
        client.close()


async def session_writes(settings: Settings, n: int) -> list[float]:
    client = command_client(settings.require_redis_url())
    attach(client, settings)
    keys = Keys(settings.key_prefix)
    leases = Leases(client, keys, "bench", 30)
    session = session_key("bench", "u", "s")
    token = leases.token()
    await leases.acquire(session, token)
    fence = leases.fence(session, token)
    samples = []
    for i in range(n):
        batch = WriteBatch()
        batch.add("RPUSH", keys.events(session), f"event {i}")
        started = time.perf_counter()
        await fence.run(client, batch)
        samples.append(time.perf_counter() - started)
    await client.aclose()
    return samples


def wait_settings(topology: SentinelRedis, wait: int) -> Settings:
    """Settings of a fresh key prefix whose writes wait for `wait` replicas, on the
    topology's database numbered `wait` (its tool queue apart from the other wait's)."""
    return bench_settings(topology.url(wait), redis_wait_replicas=wait)


def start_workers(settings: list[Settings], stack: contextlib.ExitStack) -> None:
    """One worker process (prefork, one child) for each of `settings`, started at once and
    stopped when `stack` closes. Each gets its settings' wait with the others (the worker
    group passes every setting): its results wait for as many replicas as the
    orchestrator's writes."""
    groups = [toolfleet_workers(s) for s in settings]
    stack.callback(stop_groups, groups)
    starts = [
        functools.partial(start_toolfleet, g, 1, 1, f"wait{g.settings.redis_wait_replicas}-")
        for g in groups
    ]
    in_parallel(*starts)


def open_runner(aio: asyncio.Runner, settings: Settings, stack: contextlib.ExitStack) -> Runner:
    """A warmed-up Runner with `settings`, closed when `stack` closes."""
    agent, model = noop_agent()
    runner = aio.run(open_runner_with(settings, agent, model))
    stack.callback(lambda: aio.run(close_runner(runner)))
    aio.run(measure_turns(runner, WARM_UP_TURNS, SESSION_TURNS))
    return runner


def measure_runs(
    aio: asyncio.Runner, topology: SentinelRedis, writes: int, turns: int, rounds: int
) -> Runs:
    """`rounds` runs of each measure at each wait, alternating between the waits: `turns`
    one-call turns, then `writes` writes of each kind (each run on a fresh key prefix)."""
    runs: Runs = {measure: {wait: [] for wait in WAITS} for measure in MEASURES}
    with contextlib.ExitStack() as stack:
        turn_settings = {wait: wait_settings(topology, wait) for wait in WAITS}
        start_workers(list(turn_settings.values()), stack)
        runners = {wait: open_runner(aio, turn_settings[wait], stack) for wait in WAITS}
        for _ in range(rounds):
            for wait in WAITS:
                runs["turn"][wait].append(
                    aio.run(measure_turns(runners[wait], turns, SESSION_TURNS))
                )
    for _ in range(rounds):
        for wait in WAITS:
            settings = wait_settings(topology, wait)
            runs["completion"][wait].append(completions(settings, writes))
            runs["result"][wait].append(results(settings, writes))
            runs["session"][wait].append(aio.run(session_writes(settings, writes)))
    return runs


def table_of(runs: Runs) -> Table:
    """The figure's table: each write's p50 and p99 with a wait, against without."""
    table = Table(
        key="replication",
        title="1b. Waiting for a replica: each acknowledged write, and a one-call turn "
        "(Sentinel, loopback)",
        columns=[
            "write",
            "n",
            "p50 µs, no wait (reference)",
            "p50 µs, wait for 1 replica",
            "p50 ÷ no wait",
            "p99 µs, no wait",
            "p99 µs, wait for 1 replica",
            "p99 ÷ no wait",
        ],
    )
    stats: dict[str, dict[int, dict[str, float]]] = {}
    run_p50s: list[str] = []
    for measure, label in MEASURES.items():
        pooled = {wait: [s for run in runs[measure][wait] for s in run] for wait in WAITS}
        stats[measure] = {wait: summary_ms(pooled[wait]) for wait in WAITS}
        off, on = (stats[measure][wait] for wait in WAITS)
        table.rows.append(
            [label, int(on["n"]), off["p50"] * 1000, on["p50"] * 1000,
             ratio(on["p50"], off["p50"]), off["p99"] * 1000, on["p99"] * 1000,
             ratio(on["p99"], off["p99"])]
        )  # fmt: skip
        run_p50s.append(f"{label.split(' (')[0]}: " + _run_p50s(runs[measure]))
    rounds = len(runs["turn"][WAITS[0]])
    table.data = {
        "runs_s": {m: {str(w): r for w, r in by_wait.items()} for m, by_wait in runs.items()},
        "stats_ms": {m: {str(w): s for w, s in by_wait.items()} for m, by_wait in stats.items()},
    }
    table.notes = [
        "A master, its replica and three sentinels, each a redis-server on loopback, "
        "reached through the `redis+sentinel://` URL (not the run's Redis). No wait: "
        "TOOLFLEET_REDIS_WAIT_REPLICAS=0, the master's acknowledgement alone; wait: 1, "
        "the default under Sentinel (WAIT 1 after the write).",
        f"Sequential, one write at a time; {rounds} runs per wait, alternating between "
        "the waits; p50 and p99 of every run's writes together. Each wait has a Redis "
        "database of its own, one worker process (prefork, one child, started with the "
        f"same wait) and a Runner; turns run in sessions of {SESSION_TURNS}.",
        "A turn makes about five waits: the lease, the user's message, the turn that "
        "sends its calls, each call's result (the worker's), the responses.",
        "p50 µs of each run, no wait → wait: " + "; ".join(run_p50s) + ".",
    ]
    return table


def _run_p50s(by_wait: dict[int, list[list[float]]]) -> str:
    def p50s(wait: int) -> str:
        return "/".join(f"{summary_ms(run)['p50'] * 1000:.0f}" for run in by_wait[wait])

    return " → ".join(p50s(wait) for wait in WAITS)


def measure(aio: asyncio.Runner, writes: int, turns: int, rounds: int) -> Table:
    """Start the topology, measure, stop it: the figure's table."""
    with SentinelRedis() as topology:
        return table_of(measure_runs(aio, topology, writes, turns, rounds))


def replication(ctx: Context) -> Table:
    """The figure, at the run's sizes (bench.context.Sizes' `replication_` fields)."""
    sizes = ctx.sizes
    return measure(
        ctx.aio, sizes.replication_writes, sizes.replication_turns, sizes.replication_rounds
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="writes of each kind per run")
    parser.add_argument("--turns", type=int, default=200, help="one-call turns per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per wait, alternating")
    options = parser.parse_args()
    with asyncio.Runner(loop_factory=loop_factory(Settings())) as aio:
        table = measure(aio, options.n, options.turns, options.rounds)
    print(table.to_markdown())


if __name__ == "__main__":
    main()
