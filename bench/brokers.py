"""Throughput and io fan-out with the tool queues on Redis and on RabbitMQ, each against
raw Celery's client and `asyncio.gather`.

Two sides, alike but for the broker: the tool queues on Redis (`TOOLFLEET_BROKER_URL`
unset) and on RabbitMQ (an amqp:// URL of a vhost of the run's own; sessions, results
and completions stay in Redis, and the orchestrator relays its outbox to RabbitMQ). Each
side has one toolfleet worker process (prefork, one child), one raw Celery worker
process alike, and one io worker; all of them run at once and rounds alternate between
the sides:

- throughput: no-op calls per second through `CeleryFleet.run` from concurrent
  sessions, against raw Celery's client keeping as many calls in flight on the same
  broker (bench.overhead);
- io fan-out: one turn of k calls of a 1 s async tool on the io worker (its batched
  intake takes its queue on either broker), against `asyncio.gather` of the same
  coroutines in this process (bench.io_pools).
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from celery import Celery

from bench import raw_celery
from bench.context import Context
from bench.harness import (
    POOL,
    in_parallel,
    median,
    raw_workers,
    start_raw,
    stop_groups,
    toolfleet_workers,
)
from bench.io_pools import gather_turn, measure, open_runner_with
from bench.overhead import close_runner, fleet_throughput, noop_agent, raw_throughput
from bench.rabbit import rabbit_vhost
from bench.report import Cell, Table, ratio
from toolfleet.orchestrator.cli.local_workers import WorkerProcess, WorkerSpec
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.config import Settings

REDIS, RABBITMQ = "Redis", "RabbitMQ"
IO_TOOL = "async_io_on_io"
WARM_UP_SESSIONS, WARM_UP_TURNS = 10, 2
WARM_UP_RAW_CALLS, WARM_UP_RAW_WINDOW = 50, 20


@dataclass
class Side:
    """One broker's settings, raw Celery client and io worker."""

    broker: str
    settings: Settings
    raw: Celery
    io_worker: WorkerProcess


@dataclass
class Measured:
    """What the rounds measured: calls/s and turn seconds, by broker, and the gathers."""

    raw: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    fleet: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    turns: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    io_rss: dict[str, dict[int, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    gathered: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))


def start_sides(
    brokers: dict[str, Settings], widest: int, stack: contextlib.ExitStack
) -> list[Side]:
    """Start each broker's side at once: its workers (a toolfleet and a raw Celery worker
    process, an io worker running `widest` calls at once) and its raw Celery client, all
    stopped when `stack` closes."""
    groups = {b: (toolfleet_workers(s), raw_workers(s)) for b, s in brokers.items()}
    stack.callback(stop_groups, [group for pair in groups.values() for group in pair])
    label = uuid.uuid4().hex[:4]

    def start(broker: str) -> WorkerProcess:
        fleet, raw = groups[broker]
        name = f"{broker.lower()}-{label}"
        io_pool = brokers[broker].default_io_pool
        specs = [WorkerSpec([POOL], 1, f"tf-{name}"), WorkerSpec([io_pool], widest, f"io-{name}")]
        started = in_parallel(
            lambda: fleet.start_all(specs), lambda: start_raw(raw, 1, 1, f"raw-{name}-")
        )
        return started[0][1]  # the io worker

    io_workers = in_parallel(*(functools.partial(start, broker) for broker in brokers))
    sides = []
    for (broker, settings), io_worker in zip(brokers.items(), io_workers, strict=True):
        app = raw_celery.create_app(settings)
        stack.callback(app.close)
        sides.append(Side(broker, settings, app, io_worker))
    return sides


def throughput_rounds(ctx: Context, sides: list[Side], measured: Measured) -> None:
    """Calls/s of raw Celery's client and of `CeleryFleet.run` on each side, in rounds."""
    sizes = ctx.sizes
    total = sizes.brokers_sessions * sizes.brokers_turns
    runners: dict[str, Runner] = {}
    try:
        for side in sides:
            agent, model = noop_agent()
            runners[side.broker] = ctx.aio.run(open_runner_with(side.settings, agent, model))
            ctx.aio.run(fleet_throughput(runners[side.broker], WARM_UP_SESSIONS, WARM_UP_TURNS))
            raw_throughput(side.raw, WARM_UP_RAW_CALLS, WARM_UP_RAW_WINDOW)
        for _ in range(sizes.brokers_rounds):
            for side in sides:
                rate = raw_throughput(side.raw, total, sizes.brokers_sessions)
                measured.raw[side.broker].append(rate)
                runner = runners[side.broker]
                rate = ctx.aio.run(
                    fleet_throughput(runner, sizes.brokers_sessions, sizes.brokers_turns)
                )
                measured.fleet[side.broker].append(rate)
    finally:
        for runner in runners.values():
            ctx.aio.run(close_runner(runner))


def io_rounds(ctx: Context, sides: list[Side], measured: Measured) -> None:
    """One turn of k calls on each side's io worker, and a gather of k, in rounds."""
    sizes = ctx.sizes
    for side in sides:  # imports, connections
        measure(ctx, side.settings, [side.io_worker], IO_TOOL, 1, 1)
    for k in sizes.brokers_io_ks:
        for _ in range(sizes.brokers_rounds):
            measured.gathered[k].append(ctx.aio.run(gather_turn(k, sizes.io_ms)))
            for side in sides:
                walls, rss = measure(ctx, side.settings, [side.io_worker], IO_TOOL, k, 1)
                measured.turns[side.broker][k] += walls
                measured.io_rss[side.broker][k] = max(rss, measured.io_rss[side.broker][k])


def brokers(ctx: Context) -> Table:
    """The figure: both sides started at once, measured in alternating rounds.

    Raises:
        RabbitMissing: RabbitMQ or `rabbitmqctl` is not there (before anything starts).
    """
    sizes = ctx.sizes
    ctx.stop_baseline()  # its workers would take the Redis side's queues too
    measured = Measured()
    widest = max(sizes.brokers_io_ks)
    with rabbit_vhost() as amqp_url, contextlib.ExitStack() as stack:
        amqp = ctx.settings.model_copy(update={"broker_url": amqp_url})
        sides = start_sides({REDIS: ctx.settings, RABBITMQ: amqp}, widest, stack)
        throughput_rounds(ctx, sides, measured)
        io_rounds(ctx, sides, measured)
    return table_of(ctx, measured)


def table_of(ctx: Context, measured: Measured) -> Table:
    """A row per broker and measure: toolfleet, its reference, their ratio, and toolfleet
    against the same measure on Redis."""
    sizes = ctx.sizes
    sessions = sizes.brokers_sessions
    table = Table(
        key="brokers",
        title="3b. Both brokers: throughput and io fan-out, the tool queues on Redis and "
        "on RabbitMQ",
        columns=["broker", "measure", "toolfleet", "reference", "÷ reference", "÷ on Redis"],
    )
    values: dict[tuple[str, str], float] = {}
    for broker in (REDIS, RABBITMQ):
        rows: list[tuple[str, float, float]] = [
            (
                f"no-op calls/s, `CeleryFleet.run` from {sessions} sessions, 1 worker "
                f"process (reference: raw Celery's client, {sessions} in flight)",
                median(measured.fleet[broker]),
                median(measured.raw[broker]),
            )
        ]
        for k in sizes.brokers_io_ks:
            rows.append(
                (
                    f"turn ms, k={k} async calls of {sizes.io_ms} ms, 1 io worker "
                    "(reference: `asyncio.gather`)",
                    median(measured.turns[broker][k]) * 1000,
                    median(measured.gathered[k]) * 1000,
                )
            )
        for label, value, reference in rows:
            values[broker, label] = value
            row: list[Cell] = [broker, label, value, reference, ratio(value, reference)]
            table.rows.append([*row, ratio(value, values[REDIS, label])])
    table.data = {
        "raw_calls_per_s": dict(measured.raw),
        "fleet_calls_per_s": dict(measured.fleet),
        "calls_per_run": sessions * sizes.brokers_turns,
        "io_turn_s": {b: {str(k): v for k, v in ks.items()} for b, ks in measured.turns.items()},
        "io_worker_peak_rss": {
            b: {str(k): v for k, v in ks.items()} for b, ks in measured.io_rss.items()
        },
        "gather_s": {str(k): v for k, v in measured.gathered.items()},
    }
    table.notes = notes(ctx)
    return table


def notes(ctx: Context) -> list[str]:
    """How the figure was measured, at the run's sizes."""
    sizes = ctx.sizes
    calls = sizes.brokers_sessions * sizes.brokers_turns
    return [
        "Redis: the tool queues on Redis lists (`TOOLFLEET_BROKER_URL` unset). RabbitMQ: "
        "on quorum queues in a vhost of the run's own on the local RabbitMQ; the "
        "orchestrator's turns push their task messages onto an outbox in Redis and its "
        "relay publishes them with publisher confirms; sessions, results and completions "
        "stay in Redis on both.",
        "Each side: one toolfleet worker process (prefork, 1 child), one raw Celery "
        "worker process alike with the same broker settings (raw Celery's client "
        "publishes with confirms on RabbitMQ, as toolfleet's relay does) and one io worker "
        f"(`-c {max(sizes.brokers_io_ks)}`); the six run at once and the rounds alternate "
        "between the sides.",
        f"Calls/s: {calls} calls per round, median of {sizes.brokers_rounds} rounds; "
        f"`CeleryFleet.run` from {sizes.brokers_sessions} concurrent sessions of "
        f"{sizes.brokers_turns} calls each; raw Celery: one client thread keeping "
        f"{sizes.brokers_sessions} `apply_async()` in flight (waits for the oldest with "
        "`.get()`, sends one more).",
        f"Turns: the whole Runner invocation of k calls, median of {sizes.brokers_rounds}; "
        "the io worker takes its messages with the batched intake on both: from Redis "
        "lists by a script call per batch, and from RabbitMQ over a connection of its own "
        "(a prefetch window of its concurrency, acks a few milliseconds' worth at a time, "
        "a multiple ack over each run of finished deliveries). Gather: the k coroutines "
        "in this process.",
        "÷ on Redis: the toolfleet value over the same measure's on Redis.",
    ]
