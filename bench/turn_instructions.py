"""Instructions per no-op call in the orchestrator process, under callgrind.

CPU time on a shared 2-core machine moves by ±15% from run to run; instruction counts do
not (user space only: the kernel's share of a round trip is not counted). Run it under
valgrind, which counts only between the two `callgrind_control` toggles:

    valgrind --tool=callgrind --instr-atstart=no --trace-children=no \\
        --callgrind-out-file=bench/out/turns.cg .venv/bin/python -m bench.turn_instructions turns
    # "Collected" / N: instructions per call; `raw` measures raw Celery's client alike

One call at a time by default; `--in-flight 200` keeps 200 sessions (raw: 200
`apply_async()`) going at once, as figure 3 does. `--cache-sim=yes` adds the simulated
cache misses. Redis and the worker processes run outside valgrind (children are not
traced).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import uuid

from bench.overhead import one_turn, raw_throughput
from bench.turn_cpu import concurrent_cpu, noop_fleets
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.gc_policy import orchestrator_policy


def counting(on: bool) -> None:
    """Switch callgrind's counting for this process (a no-op outside valgrind)."""
    subprocess.run(
        ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
        check=False,
        capture_output=True,
    )


async def turns(runner: Runner, n: int) -> None:
    session_id = ""
    for i in range(n):
        if i % 10 == 0:
            session_id = f"ir-{uuid.uuid4().hex}"
        await one_turn(runner, session_id, f"turn {i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", choices=["turns", "raw"])
    parser.add_argument("-n", type=int, default=100, help="calls counted")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=1,
        help="sessions (raw: calls) at once; n / this turns each",
    )
    options = parser.parse_args()
    n, width = options.n, options.in_flight
    # Valgrind slows the orchestrator ~50x: a lease must outlive a slow turn.
    with noop_fleets(lease_ttl_s=120.0) as (runner, app, aio):
        task = app.tasks["bench.noop"]
        aio.run(turns(runner, 20))  # warm-up, both paths
        for _ in range(20):
            task.apply_async().get(timeout=60)
        orchestrator_policy()
        counting(True)
        if options.path == "turns" and width > 1:
            aio.run(concurrent_cpu(runner, width, n // width))
        elif options.path == "turns":
            aio.run(turns(runner, n))
        elif width > 1:
            raw_throughput(app, n, width)
        else:
            for _ in range(n):
                task.apply_async().get(timeout=60)
        counting(False)


if __name__ == "__main__":
    main()
