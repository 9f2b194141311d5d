"""The result reader's batching under figure 3's load, off and on.

`python -m bench.read_batching [--rounds 4] [--sessions 200] [--turns 10]`

One process, a private Redis, one toolfleet and one raw Celery worker process (one child
each). Rounds alternate raw Celery's client, the orchestrator's sessions with batching
off and with it on (TOOLFLEET_RESULT_BATCH_MS, its default); each prints this process's
CPU ms per call, calls/s, and the orchestrator's socket writes (its auto-pipelined
connection's flushes) and result reads per call.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from typing import Any

from bench.overhead import raw_throughput
from bench.turn_cpu import concurrent_cpu, noop_fleets
from toolfleet.orchestrator import autopipeline
from toolfleet.orchestrator.fleet import results
from toolfleet.orchestrator.fleet.read_batching import ReadBatching
from toolfleet.shared.gc_policy import orchestrator_policy

COUNTS: collections.Counter[str] = collections.Counter()


def _count(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        COUNTS[label] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def measured(run: Callable[[], object], calls: int) -> str:
    COUNTS.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return (
        f"{cpu / calls * 1000:.3f} ms CPU, {calls / wall:.0f} calls/s, "
        f"{COUNTS['writes'] / calls:.2f} writes, {COUNTS['reads'] / calls:.2f} reads per call"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    options = parser.parse_args()
    _count(autopipeline._Wire, "_flush", "writes")
    _count(results.ResultWaiter, "_handle", "reads")
    calls = options.sessions * options.turns
    with noop_fleets() as (runner, app, aio):
        aio.run(concurrent_cpu(runner, 10, 2))  # warm-up
        raw_throughput(app, 50, 20)
        orchestrator_policy()
        waiter = runner.replica.waiter
        batching = {"off": ReadBatching.off(), "on": waiter.batching}

        def sessions() -> None:
            aio.run(concurrent_cpu(runner, options.sessions, options.turns))

        for round_ in range(1, options.rounds + 1):
            print(f"round {round_}")
            raw = measured(lambda: raw_throughput(app, calls, options.sessions), calls)
            print("  raw Celery's client:", raw)
            for name, policy in batching.items():
                waiter.batching = policy
                print(f"  sessions, batching {name}:", measured(sessions, calls))


if __name__ == "__main__":
    main()
