"""`toolfleet demo`: the whole system on this machine in one command.

A private server, worker processes for each pool, the trip planner agent: one turn
fans out five tool calls across the workers, then a booking is confirmed in the
background by a job and the agent resumes by itself.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from contextlib import ExitStack

from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.cli.conversation import converse
from toolfleet.orchestrator.cli.launch import load_agent, pools_of, start_local_fleet
from toolfleet.orchestrator.cli.local_workers import WorkerSpec
from toolfleet.shared import event_loop
from toolfleet.shared.config import Settings

DEMO_AGENT = "toolfleet.orchestrator.cli.demo_agent:agent"
NEXT_STEPS = """\
next (from the repository, where examples/ is):
  toolfleet run --agent examples.weather:agent "Weather in London, Paris and Tokyo?"
  toolfleet run --agent examples.reimbursement:agent "Please reimburse 200$ for meals"
      then, in another terminal: toolfleet tickets list / toolfleet tickets approve <call-id>
  docker compose up --scale worker=8      scale tool workers (docs/guides/compose.md)
  toolfleet flower                        watch the fleet in Flower (docs/guides/flower.md)"""


async def _demo(settings: Settings, printer: ConsolePrinter, timeout_s: float) -> None:
    from toolfleet.orchestrator.cli.demo_agent import MESSAGE

    settled = await converse(
        load_agent(DEMO_AGENT),
        settings,
        printer,
        user_id="demo",
        session_id=f"demo-{uuid.uuid4().hex[:8]}",
        message=MESSAGE,
        wait_s=timeout_s,
        explain_pending=False,
    )
    if not settled:
        raise TimeoutError(f"the booking was not confirmed within {timeout_s:g} s")


def summary(printer: ConsolePrinter) -> str:
    """The closing text of `toolfleet demo`: each fan-out turn's parallel speed-up, each
    background completion, then suggested next commands."""
    lines = ["", "summary:"]
    for turn in printer.turns:
        lines.append(
            f"  {turn.calls} tool calls in one model turn ran on {turn.processes} worker "
            f"processes: {turn.wall_s:.2f} s wall for {turn.tool_s:.2f} s of tool time "
            f"({turn.tool_s / turn.wall_s:.1f}x)"
        )
    for done in printer.completions:
        lines.append(
            f"  {done.tool} was completed in the background by a worker {done.source} after "
            f"{done.after_s:.1f} s; the agent resumed by itself and answered"
        )
    return "\n".join([*lines, "", NEXT_STEPS])


def cmd_demo(args: argparse.Namespace) -> None:
    """`toolfleet demo`: run the trip planner, then print `summary`.

    Without TOOLFLEET_REDIS_URL it starts an embedded server and workers (three processes for
    the default pool). Raises TimeoutError if the booking is not confirmed in `--timeout` s."""
    settings = Settings()
    settings = settings.model_copy(update={"tool_modules": [DEMO_AGENT.partition(":")[0]]})
    printer = ConsolePrinter(sys.stdout)
    with ExitStack() as stack:
        if not settings.redis_url:
            # Two worker processes for the fan-out pool show calls spreading across them.
            specs = [
                WorkerSpec([pool], 3 if pool == settings.default_pool else 1)
                if settings.pool_kind(pool) == "cpu"
                else WorkerSpec([pool])  # io: the settings' io concurrency, threads
                for pool in pools_of(load_agent(DEMO_AGENT), settings)
            ]
            specs.append(WorkerSpec([settings.default_pool], 3))
            settings = start_local_fleet(stack, settings, specs)
        event_loop.run(_demo(settings, printer, args.timeout), settings)
    print(summary(printer))
