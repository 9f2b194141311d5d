"""What waiting for a replica costs: a posted completion, a worker's result, a session write.

`python -m bench.replication_wait [--n 2000]`

Starts a master, its replica and three sentinels on loopback (tests.faults.sentinels)
and times, sequentially, each acknowledged write on the `redis+sentinel://` URL with
TOOLFLEET_REDIS_WAIT_REPLICAS 0 (acknowledged by the master alone) and 1 (the default
under Sentinel): `Completions.post_result` (a 202), `ResultReporter.post` (a worker's
result, before its task is acked) and a fenced session write through an orchestrator's
auto-pipelined client (`Fence.run`, what a stored turn does); then whole turns of one
no-op call through one worker process (`Runner`, an offline model), which carry every
wait a call makes: the lease, the user's message, the turn that sends the call, the
worker's result and the stored responses.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from bench.harness import bench_settings, start_toolfleet, toolfleet_workers
from bench.overhead import measure_turns, noop_agent
from tests.faults.sentinels import SentinelRedis
from toolfleet.orchestrator.connections import command_client
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, PendingCall, ToolResult
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.replication import Replication, attach
from toolfleet.shared.reporting import ResultReporter


def _summary(name: str, wait: int, samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1e6
    p99 = ordered[int(len(ordered) * 0.99) - 1] * 1e6
    return f"{name:<28} wait {wait}: p50 {p50:7.0f} us  p99 {p99:7.0f} us"


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


def turns(url: str, wait: int, n: int) -> list[float]:
    """`n` one-call turns in one session after another (10 turns each), one at a time."""
    settings = bench_settings(url, redis_wait_replicas=wait)
    agent, model = noop_agent()
    with toolfleet_workers(settings) as group:
        start_toolfleet(group, 1, 1, "wait")

        async def run() -> list[float]:
            async with Runner(agent, settings, model=model) as runner:
                await measure_turns(runner, 20, 10)  # warm-up
                return await measure_turns(runner, n, 10)

        return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=200)
    options = parser.parse_args()
    n = options.n
    with SentinelRedis() as topology:
        for wait in (0, 1, 0, 1):
            print(_summary("one-call turn", wait, turns(topology.url(), wait, options.turns)))
        for wait in (0, 1, 0, 1):
            settings = Settings(
                redis_url=topology.url(),
                key_prefix=f"bench-{wait}-{time.monotonic_ns()}",
                redis_wait_replicas=wait,
            )
            print(_summary("post_result (completion)", wait, completions(settings, n)))
            print(_summary("ResultReporter.post", wait, results(settings, n)))
            samples = asyncio.run(session_writes(settings, n))
            print(_summary("Fence.run (session write)", wait, samples))


if __name__ == "__main__":
    main()
