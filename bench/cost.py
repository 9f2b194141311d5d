"""Cost as the work grows: Redis memory per session, event and pending ticket,
replica memory per 1,000 sessions, and the time to apply 10,000 completions, each at two
sizes, with two `toolfleet serve --http` replicas as separate processes.

`python -m bench.cost [--quick]` runs it alone (a private Redis, the replicas, one io
worker), prints the table, writes the JSON and draws the plot (bench/cost_plot.py); at
full sizes those are bench/figures/cost.json and cost.png, and bench/RESULTS.md is
rewritten from them. `python -m bench.run --only cost` runs it within the suite.

Replicas keep no session between invocations (sessions live in Redis; a replica holds
one only while it runs a turn or applies a completion), so replica memory is measured as
what the sessions served leave behind (RSS after, settled) and the peak while serving
them (VmHWM), per 1,000 sessions, against the JSON bytes those sessions store.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench import cost_agents
from bench.context import FULL, SMOKE, Context
from bench.cost_measures import (
    apply_completions,
    celery_backend_per_task,
    pending_by_session,
    pending_record_bytes,
    settled_memory,
    stored_bytes,
    stream_floor,
)
from bench.harness import (
    CpuMeter,
    bench_settings,
    cpu_groups,
    machine_info,
    start_toolfleet,
    toolfleet_workers,
)
from bench.replicas import CHAT, TICKETS, Replicas, drive, http_turn_s, open_tickets
from bench.report import Table, machine_markdown, ratio
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import Keys, SessionKey

OUT_DIR = Path(__file__).resolve().parent / "out"
FIGURES_DIR = Path(__file__).resolve().parent / "figures"
KIB, MIB = 1024, 1024 * 1024


# ---------------------------------------------------------------- the figure


@dataclass
class Point:
    """What one size measured."""

    size: int
    memory: dict[str, int]  # Redis used_memory at once and settled, the run's keys settled
    base: int  # the run's keys' memory before
    replicas: dict[str, int]  # VmRSS, VmHWM of the replicas together
    extra: dict[str, Any] = field(default_factory=dict)

    def per_unit(self, units: int | None = None) -> float:
        return (self.memory["keys"] - self.base) / (units or self.size)


def cost(ctx: Context) -> Table:
    sizes = ctx.sizes
    ctx.stop_baseline()
    settings = ctx.settings.model_copy(
        update={"key_prefix": f"tfcost-{uuid.uuid4().hex[:8]}", "default_timeout_s": 120.0}
    )
    group = toolfleet_workers(settings, pool_impl="threads")
    settings = group.settings  # the bench pool is an io pool
    keys = Keys(settings.key_prefix)
    client = redis.Redis.from_url(ctx.redis_url)
    ours = f"{settings.key_prefix}:*"
    settle = sizes.cost_settle_s
    chat_turns = [f"turn {t}" for t in range(sizes.cost_turns)]
    per_session = sizes.cost_tickets_per_session
    open_message = f"open {per_session} tickets"
    data: dict[str, Any] = {}
    try:
        start_toolfleet(group, 1, sizes.cost_worker_threads, "cost")
        with Replicas(settings) as replicas:
            groups = cpu_groups(ctx.redis_url, workers=group.workers)
            meter = CpuMeter({**groups, "replicas": replicas.pids()})

            def run(app: str, first: int, count: int, messages: list[str]) -> list[SessionKey]:
                return ctx.aio.run(
                    drive(replicas, app, first, count, messages, sizes.cost_in_flight)
                )

            # Warm both replicas (imports, caches, connection pools) before any baseline.
            run(CHAT, 10**9, 20, chat_turns)
            run(TICKETS, 10**9, 4, ["open 1 ticket"])
            warm_calls = [c for calls in pending_by_session(client, keys).values() for c in calls]
            apply_completions(ctx.redis_url, keys, warm_calls, 2, meter, 60)
            base = settled_memory(client, settle, ours)["keys"]
            replicas_base = replicas.memory()
            data["replicas_base"] = replicas_base

            # Sessions: the smaller size, then more up to the larger.
            sessions: list[Point] = []
            chat_keys: list[SessionKey] = []
            for target in sizes.cost_sessions:
                started = time.perf_counter()
                chat_keys += run(CHAT, len(chat_keys), target - len(chat_keys), chat_turns)
                elapsed = time.perf_counter() - started
                memory = settled_memory(client, settle, ours)
                point = Point(target, memory, base, replicas.memory())
                point.extra = {**stored_bytes(client, keys, chat_keys), "drive_s": elapsed}
                sessions.append(point)

            probes = {0: ctx.aio.run(http_turn_s(replicas.replicas[0], "0", sizes.cost_probes))}
            # Pending tickets: a size, 10,000 of its completions applied, the next size.
            tickets: list[Point] = []
            applies: list[dict[str, Any]] = []
            runner = Runner(cost_agents.tickets, settings)
            ctx.aio.run(runner.__aenter__())
            try:
                made = 0
                for target in sizes.cost_tickets:
                    before = settled_memory(client, settle, ours)["keys"]
                    left = int(client.hlen(keys.pending()))  # not completed at the smaller size
                    count = target // per_session
                    started = time.perf_counter()
                    ctx.aio.run(
                        open_tickets(runner, made, count, open_message, sizes.cost_in_flight)
                    )
                    elapsed = time.perf_counter() - started
                    made += count
                    memory = settled_memory(client, settle, ours)
                    point = Point(target, memory, before, replicas.memory())
                    point.extra = {**pending_record_bytes(client, keys), "drive_s": elapsed}
                    if point.extra["records"] != left + count * per_session:
                        raise ToolfleetError(
                            f"{point.extra['records']} pending tickets, "
                            f"{left + count * per_session} expected"
                        )
                    tickets.append(point)
                    probes[point.extra["records"]] = ctx.aio.run(
                        http_turn_s(replicas.replicas[0], str(target), sizes.cost_probes)
                    )
                    point.extra["replicas_after_probes"] = replicas.memory()
                    waiting = list(pending_by_session(client, keys).values())
                    chosen = [c for calls in waiting for c in calls][: sizes.cost_completions]
                    applied = apply_completions(
                        ctx.redis_url, keys, chosen, sizes.cost_posters, meter, 1800
                    )
                    applied["pending"] = point.extra["records"]
                    applied["completions"] = len(chosen)
                    applied["floor_s"] = stream_floor(
                        ctx.redis_url, settings.key_prefix, len(chosen), sizes.cost_posters
                    )
                    applied["replicas"] = replicas.memory()
                    applies.append(applied)
            finally:
                ctx.aio.run(runner.__aexit__(None, None, None))
            data["http_turn_s"] = probes
        celery_ref = celery_backend_per_task(ctx.redis_url, sizes.cost_reference_tasks, settle)
    finally:
        group.stop()
        for key in client.scan_iter(f"{settings.key_prefix}:*", count=1000):
            client.delete(key)
        client.close()
    return table(sessions, tickets, applies, celery_ref, data, sizes_note(ctx))


def sizes_note(ctx: Context) -> dict[str, Any]:
    s = ctx.sizes
    return {
        "turns": s.cost_turns,
        "tickets_per_session": s.cost_tickets_per_session,
        "in_flight": s.cost_in_flight,
        "posters": s.cost_posters,
        "settle_s": s.cost_settle_s,
        "worker_threads": s.cost_worker_threads,
        "reference_tasks": s.cost_reference_tasks,
        "probes": s.cost_probes,
    }


def table(
    sessions: list[Point],
    tickets: list[Point],
    applies: list[dict[str, Any]],
    celery_ref: dict[str, float],
    data: dict[str, Any],
    params: dict[str, Any],
) -> Table:
    out = Table(
        key="cost",
        title="9. Cost as the work grows: two replicas, sessions and pending tickets at two sizes",
        columns=["measure", "size", "value", "growth", "reference", "ratio"],
    )
    rows: list[list[Any]] = []

    def pair(
        label: str, points: list[Point], unit: str, values: list[float], refs: list[float]
    ) -> None:
        for i, (point, value, ref) in enumerate(zip(points, values, refs, strict=True)):
            growth = ratio(value, values[0]) if i else None
            rows.append([label, f"{point.size:,} {unit}", value, growth, ref, ratio(value, ref)])

    raw_session = [p.extra["raw_bytes_per_session"] for p in sessions]
    pair("Redis KiB per session", sessions, "sessions",
         [p.per_unit() / KIB for p in sessions], [r / KIB for r in raw_session])  # fmt: skip
    pair("Redis bytes per event", sessions, "sessions",
         [p.per_unit(p.extra["events"]) for p in sessions],
         [p.extra["raw_bytes_per_event"] for p in sessions])  # fmt: skip
    base = data["replicas_base"]
    pair("replica RSS MiB per 1,000 sessions, after (2 replicas)", sessions, "sessions",
         [(p.replicas["VmRSS"] - base["VmRSS"]) / MIB / (p.size / 1000) for p in sessions],
         [r * 1000 / MIB for r in raw_session])  # fmt: skip
    pair("replica peak RSS MiB per 1,000 sessions (VmHWM growth)", sessions, "sessions",
         [(p.replicas["VmHWM"] - base["VmHWM"]) / MIB / (p.size / 1000) for p in sessions],
         [r * 1000 / MIB for r in raw_session])  # fmt: skip
    pair("Redis bytes per pending ticket", tickets, "tickets",
         [p.per_unit() for p in tickets],
         [celery_ref["memory_per_task"]] * len(tickets))  # fmt: skip
    pair("of which its pending record (MEMORY USAGE)", tickets, "tickets",
         [p.extra["memory_per_record"] for p in tickets],
         [p.extra["json_bytes"] for p in tickets])  # fmt: skip
    for i, applied in enumerate(applies):
        label = f"s to apply {applied['completions']:,} completions (posted → all resumed)"
        growth = ratio(applied["settled_s"], applies[0]["settled_s"]) if i else None
        seconds, floor = applied["settled_s"], applied["floor_s"]
        pending = f"{applied['pending']:,} tickets pending"
        rows.append([label, pending, seconds, growth, floor, ratio(seconds, floor)])
    probes = sorted(data["http_turn_s"].items())
    for i, (pending, seconds) in enumerate(probes):
        growth = ratio(seconds, probes[i - 1][1]) if i else None
        rows.append(["s of one HTTP turn (median; one call, 4 events)",
                     f"{pending:,} tickets pending", seconds, growth, probes[0][1],
                     ratio(seconds, probes[0][1])])  # fmt: skip
    out.rows = rows
    out.data = {
        "sessions": [dataclasses.asdict(p) for p in sessions],
        "tickets": [dataclasses.asdict(p) for p in tickets],
        "completions": applies,
        "celery_reference": celery_ref,
        "params": params,
        **data,
    }
    loads = ", ".join(
        f"{a['pending']:,} pending: load {a['loadavg'][0]:.2f}, "
        f"{a['cpu_s']['machine'] / a['cpu_s']['wall']:.2f} cores busy, "
        f"applied in {a['applied_s']:.1f} s, posted in {a['post_s']:.1f} s"
        for a in applies
    )
    out.notes = [
        "Growth: the value at the larger size over the value at the smaller; 1.0 is linear "
        "(a per-unit cost that does not change with size).",
        f"Sessions: created over HTTP on two `toolfleet serve --http` replicas (alternately), "
        f"{params['in_flight']} at a time, each {params['turns']} turns of one no-op call and "
        "an answer (4 events a turn). Redis: the memory of the run's keys (MEMORY USAGE) "
        f"minus the same before, both settled (settled: {params['settle_s']:g} s after the "
        "last write, when the replies kept per write have expired). Reference: the bytes "
        "of the JSON stored for a session (its events and its session hash), from a sample.",
        "Replicas hold no session between turns (sessions live in Redis): RSS after is what "
        "serving them left behind, VmHWM growth the peak while "
        f"{params['in_flight']} were in flight; the reference is what holding those sessions' "
        "JSON in memory would take.",
        f"Pending tickets: sessions of {params['tickets_per_session']} long-running calls in "
        "one turn, opened through the Python API (`Runner.run` in the benchmark's process, "
        f"{params['in_flight']} at a time; see the HTTP turn below for why not over HTTP); "
        "the session and its events are included in the per-ticket cost. Reference: "
        "Celery's own Redis result backend, one task stored STARTED with the same initial "
        f"result ({params['reference_tasks']:,} tasks, per task); for the pending record, "
        "the bytes of its JSON.",
        "Completions: posted with `Completions.post_result` from "
        f"{params['posters']} threads (a background job), applied by the replicas' "
        "listeners (each session resumed and answered once per result); timed until no "
        "pending record of them is left and no session owes the model a turn. Reference: "
        "the Redis stream floor, as many XADDs from as many threads read by a consumer "
        "group 100 at a time and acknowledged.",
        "HTTP turn: one new session's first message to a replica (`POST .../messages`, "
        f"median of {params['probes']}) with that many tickets pending; reference: the same "
        "with none. The route reads the session's pending records after each turn "
        "(`SessionStore.pending_calls`: the session's set of pending call ids, then only "
        "those records).",
        f"Timing under: {loads}.",
    ]
    return out


# ---------------------------------------------------------------- alone


def main(argv: list[str] | None = None) -> int:
    from bench import results_page
    from bench.cost_plot import plot
    from bench.run import cleanup, redis_server

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check it runs")
    parser.add_argument("--redis-url", help="use this Redis (a database of its own)")
    parser.add_argument("--sessions", type=int, nargs=2, metavar=("SMALL", "LARGE"))
    parser.add_argument("--tickets", type=int, nargs=2, metavar=("SMALL", "LARGE"))
    parser.add_argument("--completions", type=int, help="completions applied at each size")
    parser.add_argument("--settle-s", type=float, help="wait before each memory reading")
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    parser.add_argument("--png", type=Path, help="where to draw the plot")
    parser.add_argument("--plot", type=Path, metavar="JSON", help="only draw a JSON written before")
    args = parser.parse_args(argv)
    png = args.png or (OUT_DIR / "cost-quick.png" if args.quick else FIGURES_DIR / "cost.png")
    if args.plot:
        plot(json.loads(args.plot.read_text()), png)
        print(f"drew {png}")
        return 0
    sizes = SMOKE if args.quick else FULL
    overrides = {
        "cost_sessions": tuple(args.sessions) if args.sessions else None,
        "cost_tickets": tuple(args.tickets) if args.tickets else None,
        "cost_completions": args.completions,
        "cost_settle_s": args.settle_s,
    }
    sizes = dataclasses.replace(sizes, **{k: v for k, v in overrides.items() if v is not None})
    saved = results_page.saved_path("cost")
    json_path = args.json or (OUT_DIR / "cost-quick.json" if args.quick else saved)
    started = time.perf_counter()
    with redis_server(args.redis_url) as url:
        settings = bench_settings(url)
        info = machine_info(url)
        print(machine_markdown(info, sizes.as_dict()) + "\n", flush=True)
        with asyncio.Runner() as aio:
            result_table = cost(Context(url, settings, sizes, aio, smoke=args.quick))
        cleanup(url, settings.key_prefix)
    result_table.data["seconds"] = time.perf_counter() - started
    print(result_table.to_markdown(), flush=True)
    result = {
        "machine": info,
        "smoke": args.quick,
        "sizes": sizes.as_dict(),
        "seconds": time.perf_counter() - started,
        "tables": {"cost": result_table.to_json()},
        "errors": {},
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2, default=str))
    plot(result, png)
    print(f"wrote {json_path} and {png}")
    if json_path.resolve() == saved.resolve():
        print(f"wrote {results_page.write()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
