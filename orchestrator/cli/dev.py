"""`toolfleet dev`: a private server, local workers and an orchestrator kept running in the
background for the next commands; `toolfleet dev stop` ends them.

The background process leaves a record in this user's private state folder: its pid, the
server's URL, the fleet and credential keys its workers use, and what it serves. `run`,
`tickets`, `status`, `serve` and `flower` read it when TOOLFLEET_REDIS_URL is not set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.cli.dev_record import (
    DevFleet,
    alive,
    log_file,
    record_file,
    running_dev_fleet,
    write_record,
)
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.launch import (
    load_agent,
    specs_for,
    start_local_fleet,
    stop_on_signals,
)
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared import event_loop
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.errors import ConfigError, ToolfleetError

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
# Prefork children of each cpu pool's local worker.
CPU_CONCURRENCY = 4


def cmd_dev(args: argparse.Namespace) -> None:
    """`toolfleet dev [stop]`: start the dev fleet in the background, or stop it."""
    if args.action == "stop":
        stop_dev_fleet()
    elif args.foreground:
        run_dev_fleet(args.agent or [], args.tools)
    else:
        start_dev_fleet(args)


def start_dev_fleet(args: argparse.Namespace) -> None:
    """Start `toolfleet dev --foreground` detached, wait for its record, and say what runs."""
    running = running_dev_fleet()
    if running is not None:
        raise ConfigError(
            f"a dev fleet is running already (pid {running.pid}, {running.redis_url}): "
            "`toolfleet dev stop` first"
        )
    log = log_file()
    command = [sys.executable, "-m", "toolfleet", "dev", "--foreground"]
    for spec in args.agent or ():
        command += ["--agent", spec]
    if args.tools:
        command += ["--tools", args.tools]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # not stopped by the terminal's Ctrl-C or its closing
        )  # fmt: skip

    def started() -> bool:
        if process.poll() is not None:
            raise ToolfleetError(
                f"toolfleet dev exited at start (status {process.returncode}):\n"
                + log.read_text()[-3000:]
            )
        fleet = running_dev_fleet()
        return fleet is not None and fleet.pid == process.pid

    wait_for(started, START_TIMEOUT_S, "the dev fleet to start", interval_s=0.1)
    fleet = running_dev_fleet()
    assert fleet is not None
    print(f"dev fleet running (pid {fleet.pid}) on {fleet.redis_url}")
    print(
        f"  pools: {', '.join(fleet.pools) or 'none'}; agents: {', '.join(fleet.agents) or 'none'}"
    )
    print(f"  log (resumed conversations, workers' output): {fleet.log}")
    print("  `toolfleet run`, `tickets`, `status`, `serve` and `flower` use it; stop it with "
          "`toolfleet dev stop`")  # fmt: skip


def stop_dev_fleet() -> None:
    """SIGTERM the dev fleet and wait for it to end (SIGKILL its group past the timeout)."""
    fleet = running_dev_fleet()
    if fleet is None:
        print("no dev fleet is running")
        return
    os.kill(fleet.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while alive(fleet.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(fleet.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(fleet.pid, signal.SIGKILL)
    record_file().unlink(missing_ok=True)
    print(f"dev fleet stopped (pid {fleet.pid})")


def run_dev_fleet(agent_specs: list[str], tools: str | None) -> None:
    """The background process: server, workers and an orchestrator for `agent_specs`, until
    SIGTERM or SIGINT; its record is removed as it ends."""
    settings = Settings()
    if settings.redis_url:
        raise ConfigError("toolfleet dev starts its own server: unset TOOLFLEET_REDIS_URL")
    agents = [load_agent(spec) for spec in agent_specs]
    modules = [*settings.tool_modules, *(tools.split(",") if tools else [])]
    modules += [spec.partition(":")[0] for spec in agent_specs]
    settings = settings.model_copy(update={"tool_modules": list(dict.fromkeys(modules))})
    pools = pools_to_serve(agents, settings)
    with ExitStack() as stack:
        specs = specs_for(pools, settings, CPU_CONCURRENCY)
        settings = start_local_fleet(stack, settings, specs)
        stack.callback(record_file().unlink, missing_ok=True)
        write_record(
            DevFleet(
                pid=os.getpid(),
                redis_url=settings.require_redis_url(),
                fleet_key=str(settings.fleet_key),
                credential_key=str(settings.credential_key),
                log=str(log_file()),
                agents=agent_specs,
                tool_modules=settings.tool_modules,
                pools=pools,
            )
        )
        event_loop.run(hold(agents, settings), settings)


def pools_to_serve(agents: list[Agent], settings: Settings) -> list[str]:
    """Pools of the agents' tools and of the tools and jobs in the settings' tool modules,
    read in one pass over the modules."""
    found = load_definitions(settings.tool_modules)
    tools = [*found.tools.values(), *(t for agent in agents for t in agent.all_tools())]
    pools = {tool_pool(t, settings) for t in tools} | {j.pool for j in found.jobs.values()}
    return sorted(pools or {settings.default_pool})


async def hold(agents: list[Agent], settings: Settings) -> None:
    """Serve `agents` (their sessions resume as tickets complete) until SIGTERM or SIGINT."""
    stop = stop_on_signals()
    printer = ConsolePrinter(sys.stdout, settings.secret_arg_names)

    def show(session: Any, update: Any) -> None:
        print(f"[{session}]", end=" ")
        printer.show(update)
        sys.stdout.flush()

    async with Orchestrator(agents, settings, on_update=show):
        print("dev fleet ready", flush=True)
        await stop.wait()


def add_dev_command(sub: Any) -> None:
    """Register `toolfleet dev` and `toolfleet dev stop`."""
    dev = sub.add_parser(
        "dev", help="keep a private server, workers and agents running for the next commands"
    )
    dev.add_argument("action", nargs="?", choices=["start", "stop"], default="start")
    dev.add_argument(
        "--agent", action="append", metavar="MODULE:ATTR",
        help="an agent to run: its tools' workers, and its sessions resumed in the background",
    )  # fmt: skip
    dev.add_argument("--tools", help="more tool modules for the workers, comma-separated")
    dev.add_argument("--foreground", action="store_true", help=argparse.SUPPRESS)
    dev.set_defaults(func=cmd_dev)
