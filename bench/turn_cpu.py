"""Orchestrator CPU per no-op call, step by step, against raw Celery's client.

`python -m bench.turn_cpu [--rounds 6] [--sessions 200] [--turns 3] [--steps 100]`

Two measurements, on a private Redis with one toolfleet and one raw Celery worker process:

- **CPU per call**: this process's `process_time` over `sessions` concurrent sessions
  running `turns` one-call no-op turns each (figure 3's workload, smaller), against raw
  Celery's client keeping as many `apply_async()` in flight; rounds alternate, and the
  report gives the minimum (the least disturbed round), the median and the median of the
  per-round ratios.
- **Per step**: `steps` turns one at a time, each step of a turn timed by its CPU (the
  time of the steps nested inside it left out). One at a time, so that an await's CPU is
  the step's own (plus the result reader's, which serves the result wait).

CPU, not wall time: the machine's cores are shared with the workers and Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import gc
import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery

from bench import raw_celery
from bench.harness import (
    bench_settings,
    raw_workers,
    start_raw,
    start_toolfleet,
    toolfleet_workers,
)
from bench.overhead import close_runner, noop_agent, one_turn, open_runner, raw_throughput
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.orchestrator.fleet.celery_fleet import CeleryFleet
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop import run as run_module
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.event_loop import loop_factory
from toolfleet.shared.gc_policy import orchestrator_policy

STEPS = [
    "session read + lease",
    "user message append",
    "model step (request + generate)",
    "model turn + publish",
    "dispatch + result wait",
    "responses append",
    "answer append + release",
    "rest (runner, loop, lease hold)",
]


class StepClock:
    """Exclusive CPU per step: a step's CPU less that of the steps nested in it."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self._stack: list[list[float]] = []  # per open step: [start, nested CPU]
        self.active = False

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if not self.active:
            yield
            return
        frame = [time.process_time(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.process_time() - frame[0]
            self.cpu[name] += spent - frame[1]
            if self._stack:
                self._stack[-1][1] += spent


CLOCK = StepClock()


def _append_step(event: Any, kwargs: dict[str, Any]) -> str:
    if event.author == "user":
        return "user message append"
    if kwargs.get("release") or kwargs.get("owes_turn") is False:
        return "answer append + release"
    return "responses append"


def instrument() -> None:
    """Wrap the steps of a turn with CLOCK (this process only)."""

    def wrap(owner: Any, name: str, label: Callable[..., str]) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            with CLOCK.step(label(*args, **kwargs)):
                return await original(*args, **kwargs)

        setattr(owner, name, timed)

    wrap(SessionStore, "get", lambda *a, **k: "session read + lease")
    if hasattr(SessionStore, "get_and_append"):  # the message rides on the read
        wrap(SessionStore, "get_and_append", lambda *a, **k: "session read + lease")
    wrap(SessionStore, "append", lambda self, s, e, **k: _append_step(e, k))
    wrap(run_module, "_model_turn", lambda *a, **k: "model step (request + generate)")
    wrap(CeleryPublisher, "publish", lambda *a, **k: "model turn + publish")

    original_run = CeleryFleet.run

    @functools.wraps(original_run)
    async def fleet_run(*args: Any, **kwargs: Any) -> Any:
        generator = original_run(*args, **kwargs)
        while True:
            with CLOCK.step("dispatch + result wait"):
                try:
                    item = await generator.__anext__()
                except StopAsyncIteration:
                    return
            yield item

    CeleryFleet.run = fleet_run  # type: ignore[method-assign]


async def step_profile(runner: Runner, turns: int) -> dict[str, float]:
    """CPU ms per turn of each step, over `turns` sequential turns (5 per session)."""
    CLOCK.cpu.clear()
    CLOCK.active = True
    started = time.process_time()
    session_id = ""
    for i in range(turns):
        if i % 5 == 0:
            session_id = f"steps-{uuid.uuid4().hex}"
        await one_turn(runner, session_id, f"turn {i}")
    total = time.process_time() - started
    CLOCK.active = False
    per_turn = {name: CLOCK.cpu.get(name, 0.0) / turns * 1000 for name in STEPS[:-1]}
    per_turn[STEPS[-1]] = total / turns * 1000 - sum(per_turn.values())
    per_turn["total"] = total / turns * 1000
    return per_turn


class GcClock:
    """Wall time spent in the garbage collector (it runs on this thread, so it is CPU)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._started = 0.0

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.spent += time.perf_counter() - self._started


async def concurrent_cpu(runner: Runner, sessions: int, turns: int) -> float:
    """Orchestrator CPU ms per call, `sessions` at once, each `turns` turns."""

    async def session(index: int) -> None:
        session_id = f"cpu-{index}-{uuid.uuid4().hex}"
        for turn in range(turns):
            await one_turn(runner, session_id, f"turn {turn}")

    started = time.process_time()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    return (time.process_time() - started) / (sessions * turns) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--no-autopipeline", action="store_true", help="TOOLFLEET_REDIS_AUTOPIPELINE=false"
    )
    options = parser.parse_args()
    instrument()
    results: dict[str, Any] = {"raw": [], "sessions": [], "gc": [], "steps": []}
    with noop_fleets(redis_autopipeline=not options.no_autopipeline) as (runner, app, aio):
        aio.run(concurrent_cpu(runner, 10, 2))  # warm-up
        raw_throughput(app, 50, 20)
        orchestrator_policy()  # as `toolfleet serve` and bench.run do
        total = options.sessions * options.turns
        for _ in range(options.rounds):
            started = time.process_time()
            raw_throughput(app, total, options.sessions)
            results["raw"].append((time.process_time() - started) / total * 1000)
            with GcClock() as collector:
                results["sessions"].append(
                    aio.run(concurrent_cpu(runner, options.sessions, options.turns))
                )
            results["gc"].append(collector.spent / total * 1000)
            results["steps"].append(aio.run(step_profile(runner, options.steps)))
    _report(results)
    if options.json:
        with open(options.json, "w") as out:
            json.dump(results, out, indent=1)


class _Ctx:
    def __init__(self, settings: Any) -> None:
        self.settings = settings


@contextmanager
def noop_fleets(**overrides: Any) -> Iterator[tuple[Runner, Celery, asyncio.Runner]]:
    """A private Redis, one toolfleet worker process and one raw Celery worker process
    (one child each); a Runner of the no-op agent, raw Celery's app and the event loop
    runner that drives the Runner. Everything is stopped on exit."""
    with EmbeddedRedis() as server:
        settings = bench_settings(server.url, **overrides)
        tf, raw = toolfleet_workers(settings), raw_workers(settings)
        app = raw_celery.create_app(settings)
        aio = asyncio.Runner(loop_factory=loop_factory(settings))  # as `toolfleet serve`
        try:
            start_toolfleet(tf, 1, 1, "tf")
            start_raw(raw, 1, 1)
            agent, model = noop_agent()
            runner = aio.run(open_runner(_Ctx(settings), agent, model))
            yield runner, app, aio
            aio.run(close_runner(runner))
        finally:
            aio.close()
            app.close()
            raw.stop()
            tf.stop()


def _report(results: dict[str, Any]) -> None:
    raw, sessions = results["raw"], results["sessions"]
    ratios = [s / r for s, r in zip(sessions, raw, strict=True)]
    print(
        "CPU ms per call (min / median): raw client "
        f"{min(raw):.2f} / {statistics.median(raw):.2f}; sessions "
        f"{min(sessions):.2f} / {statistics.median(sessions):.2f}; "
        f"sessions / raw, median of rounds {statistics.median(ratios):.2f}; "
        f"of the sessions' CPU, the garbage collector {statistics.median(results['gc']):.2f}"
    )
    steps = results["steps"]
    print("| step | CPU ms per turn (min) | median |")
    print("| --- | --- | --- |")
    for name in [*STEPS, "total"]:
        values = [r[name] for r in steps]
        print(f"| {name} | {min(values):.3f} | {statistics.median(values):.3f} |")


if __name__ == "__main__":
    main()
