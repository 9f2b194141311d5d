"""The benchmark suite's figures: for each, its number, what it measures, the reference it
is compared with, the sizes that shape it and how to rerun it. bench.run measures them;
bench.results_page describes them from this list."""

from __future__ import annotations

from dataclasses import dataclass

ADK_SETUP = (
    "# once: google-adk pins google-genai<3, so its side gets a virtualenv of its own",
    "python3 -m venv bench/out/adk-venv && bench/out/adk-venv/bin/pip install google-adk",
)


@dataclass(frozen=True)
class Figure:
    """One figure of the suite.

    Attributes:
        key: the name `bench.run --only` takes, the table's key and its saved JSON's stem.
        number: the figure's number as its table's title prints it: digits, then
            perhaps a letter.
        name: a short title for the page.
        module: the module that measures it.
        measures: what it measures, in a sentence or two.
        reference: what it is compared with, measured in the same run.
        versus: the reference in a few words, for the page's index.
        sizes: prefixes of the `Sizes` fields that shape it.
        setup: shell lines to run once before it can be measured.
        also: other commands that measure it.
        history: how the heading of its newest pass in bench/HISTORY.md begins.
        plot: "module:function" that draws its image from its saved JSON, if it has one.
    """

    key: str
    number: str
    name: str
    module: str
    measures: str
    reference: str
    versus: str
    sizes: tuple[str, ...]
    setup: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    history: str = ""
    plot: str = ""

    @property
    def rank(self) -> tuple[int, str]:
        """The figure's place in number order: its digits, then any letter after them."""
        digits = "".join(c for c in self.number if c.isdigit())
        return int(digits), self.number[len(digits) :]


FIGURES: tuple[Figure, ...] = (
    Figure(
        key="per_call",
        number="1",
        name="Per-call overhead",
        module="bench.overhead",
        measures="The latency of one no-op tool call at a time through toolfleet "
        "(`CeleryFleet.run`: dispatch to result), of a whole Runner turn around it (model, "
        "session, one call), with tracing on, and of the tool run in-process for contrast.",
        reference="Raw Celery: `apply_async().get()` on a worker with the same broker "
        "settings; rounds alternate between the paths.",
        versus="raw Celery",
        sizes=("overhead_",),
        history="Figures 1 and 7 after",
    ),
    Figure(
        key="replication",
        number="1b",
        name="Waiting for a replica",
        module="bench.replication_wait",
        measures="Under Sentinel (a master, its replica, three sentinels on loopback), the "
        "latency of each acknowledged write a call makes (a posted completion, a worker's "
        "tool result, a fenced session write) and of a whole one-call turn through one "
        "worker, with each write waiting for one replica (TOOLFLEET_REDIS_WAIT_REPLICAS=1).",
        reference="The same writes and turns acknowledged by the master alone "
        "(TOOLFLEET_REDIS_WAIT_REPLICAS=0); runs alternate between the two.",
        versus="no wait: the master's acknowledgement alone",
        sizes=("replication_",),
        also=(".venv/bin/python -m bench.replication_wait   # the same alone; --help: sizes",),
        history="Figure 1b: waiting for a replica",
    ),
    Figure(
        key="fanout",
        number="2",
        name="Fan-out",
        module="bench.fanout",
        measures="The wall time of one turn of k parallel calls of a 200 ms tool, for "
        "several k and worker slot counts, and how far apart the calls started.",
        reference="The ideal, ceil(k / slots) x the tool's time (efficiency is ideal ÷ "
        "turn time), and raw Celery sending the same k calls with `apply_async`.",
        versus="the ideal: ceil(k / slots) x the tool's time",
        sizes=("fanout_",),
        history="After the packaging and exactly-once changes",
    ),
    Figure(
        key="throughput",
        number="3",
        name="Throughput",
        module="bench.overhead",
        measures="No-op calls per second from many concurrent sessions, through Runner "
        "sessions and through `CeleryFleet.run`, the orchestrator's CPU per call and its "
        "event-loop lag, with one and two worker processes.",
        reference="Raw Celery's client at the same concurrency on the same worker "
        "processes: its calls per second and its CPU per call.",
        versus="raw Celery's client",
        sizes=("tput_",),
        history="Figure 3, eighth pass",
    ),
    Figure(
        key="brokers",
        number="3b",
        name="Both brokers",
        module="bench.brokers",
        measures="With the tool queues on Redis and on RabbitMQ "
        "(`TOOLFLEET_BROKER_URL=amqp://...`, a vhost of the run's own): no-op calls per "
        "second through `CeleryFleet.run` from concurrent sessions on one worker process, "
        "and one turn of k parallel 1 s async calls on one io worker.",
        reference="On the same broker: raw Celery's client at the same concurrency, and "
        "`asyncio.gather` of the same coroutines in one process; rounds alternate between "
        "the brokers.",
        versus="raw Celery's client, `asyncio.gather`, on each broker",
        sizes=("brokers_", "io_ms"),
        setup=("# RabbitMQ on 127.0.0.1:5672 (guest/guest), with rabbitmqctl on PATH",),
        history="Figure 3b: both brokers",
    ),
    Figure(
        key="scale",
        number="4",
        name="Orchestrator at scale",
        module="bench.scale",
        measures="Many concurrent sessions of several turns of parallel calls: turn "
        "latency, calls per second, event-loop lag, memory per session, and that no "
        "response is lost or duplicated and no session hangs.",
        reference="The floor of a turn (the tool's time), the capacity floor at raw "
        "Celery's rate measured by figure 3 in the same run, and a 10 ms loop tick.",
        versus="a turn's floor, raw Celery's rate",
        sizes=("scale_",),
        history="4. Orchestrator at scale",
    ),
    Figure(
        key="resume",
        number="5",
        name="Resume latency",
        module="bench.resume",
        measures="The time from a long-running call's completion being posted to the "
        "model being called again, and to the answer being stored.",
        reference="A bare Redis stream hop (XADD to a blocked XREADGROUP): the floor.",
        versus="a bare Redis stream hop",
        sizes=("resume_",),
        history="5. Resume latency",
    ),
    Figure(
        key="adk",
        number="6",
        name="Against ADK in-process",
        module="bench.adk",
        measures="The wall time of one turn of two sync tools, one async tool and one "
        "CPU-bound tool, run by toolfleet on prefork worker slots.",
        reference="The same turn run in-process by google-adk's Runner (an interpreter "
        "with google-adk), and the ideal: the longest call.",
        versus="ADK in-process",
        sizes=("adk_",),
        setup=ADK_SETUP,
        history="6. Against ADK in-process",
    ),
    Figure(
        key="io",
        number="7",
        name="io pools",
        module="bench.io_pools",
        measures="One turn of k calls of a 1 s I/O tool on one worker host: the io pool's "
        "turn time and resident memory, with Celery's own consumer instead of the io "
        "intake, on the prefork pool, and a sync tool on the io pool's threads.",
        reference="ADK's way: `asyncio.gather` of the same coroutines in one process.",
        versus="`asyncio.gather` in one process (ADK's way)",
        sizes=("io_",),
        history="Figure 7: the io intake",
    ),
    Figure(
        key="io_defaults",
        number="7b",
        name="The embedded default against ADK",
        module="bench.io_defaults",
        measures="One turn of k parallel 1 s async calls, k up to 10,000, on the embedded "
        "default, as `toolfleet run` starts it with no setting changed, and whether every "
        "call was answered.",
        reference="google-adk's Runner in-process running the same scripted turns; "
        "rounds alternate between the two sides.",
        versus="ADK in-process",
        sizes=("wide_", "io_ms"),
        setup=ADK_SETUP,
        history="Figure 7b:",
    ),
    Figure(
        key="mcp",
        number="8",
        name="MCP through the fleet",
        module="bench.mcp",
        measures="The latency and calls per second of one MCP tool call (stdio server) "
        "through the fleet, one at a time and many at once, and how many servers the "
        "worker started.",
        reference="A direct MCP client call over one session, and a plain async tool "
        "through the fleet on the same io worker.",
        versus="a direct MCP client call",
        sizes=("mcp_",),
        history="MCP through the fleet",
    ),
    Figure(
        key="cost",
        number="9",
        name="Cost as the work grows",
        module="bench.cost",
        measures="With two `toolfleet serve --http` replicas, at two sizes each: Redis "
        "memory per session, per event and per pending ticket, the replicas' memory per "
        "1,000 sessions, the time to apply completions, and an HTTP turn's time "
        "with tickets pending. Opt-in: the full sizes take about 20 minutes.",
        reference="The JSON bytes the sessions store, Celery's result backend per task, "
        "the Redis stream floor for as many completions, and an HTTP turn with no "
        "ticket pending.",
        versus="the JSON stored, Celery's result backend, a stream's floor",
        sizes=("cost_",),
        also=(".venv/bin/python -m bench.cost   # the same alone; --help: other sizes",),
        history="Figure 9: cost as the work grows",
        plot="bench.cost_plot:plot",
    ),
)

BY_KEY = {f.key: f for f in FIGURES}
