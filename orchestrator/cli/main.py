"""The `toolfleet` command: run agents, serve them, run workers, handle tickets."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from contextlib import ExitStack

import redis

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.model_choice import describe_choice
from toolfleet.orchestrator.cli.cancel import add_cancel_command
from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.cli.conversation import converse
from toolfleet.orchestrator.cli.demo import cmd_demo
from toolfleet.orchestrator.cli.dev import add_dev_command
from toolfleet.orchestrator.cli.dev_record import running_dev_fleet
from toolfleet.orchestrator.cli.flower import add_flower_command
from toolfleet.orchestrator.cli.launch import (
    check_dev_serves,
    load_agent,
    load_plugin,
    local_fleet_settings,
    pools_of,
    specs_for,
    start_local_fleet,
    stop_on_signals,
)
from toolfleet.orchestrator.cli.mcp import add_mcp_commands
from toolfleet.orchestrator.cli.status import cmd_status
from toolfleet.orchestrator.cli.tickets import add_ticket_commands
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared import event_loop, tracing
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.gc_policy import orchestrator_policy
from toolfleet.shared.keys import queue_name
from toolfleet.shared.pool_kinds import concurrency_for, kind_of_pools, worker_pool_argv
from toolfleet.shared.redis_check import check_redis

# Prefork children of a `toolfleet worker` for cpu pools unless --concurrency says otherwise.
CPU_CONCURRENCY = 4


async def _run(agent: Agent, settings: Settings, args: argparse.Namespace) -> None:
    printer = ConsolePrinter(sys.stdout, settings.secret_arg_names)
    settled = await converse(
        agent,
        settings,
        printer,
        user_id=args.user,
        session_id=args.session,
        message=args.message,
        wait_s=None if args.no_wait else args.wait,
        plugins=[load_plugin(spec) for spec in args.plugin or ()],
    )
    if not settled and not args.no_wait:
        print(
            f"gave up waiting after {args.wait:g} s; "
            "the session resumes when `toolfleet serve` runs"
        )


def cmd_run(args: argparse.Namespace) -> None:
    """`toolfleet run`: send one message to `--agent`, print the conversation, and wait up to
    `--wait` s for its tickets.

    The agent's module is added to the tool modules. Without TOOLFLEET_REDIS_URL it starts an
    embedded server and one worker per pool the agent uses, stopped when the command ends."""
    settings = Settings()
    agent = load_agent(args.agent)
    module = args.agent.partition(":")[0]
    if module not in settings.tool_modules:
        settings = settings.model_copy(update={"tool_modules": [*settings.tool_modules, module]})
    dev = None if settings.redis_url else running_dev_fleet()
    if dev is not None:
        check_dev_serves(dev, agent, args.agent, settings)
        settings = dev.settings(settings)
    with ExitStack() as stack:
        if not settings.redis_url:
            specs = specs_for(pools_of(agent, settings), settings, args.concurrency)
            settings = start_local_fleet(stack, settings, specs)
        else:
            check_redis(settings.redis_url)
        orchestrator_policy()
        event_loop.run(_run(agent, settings, args), settings)


def print_models(orch: Orchestrator) -> None:
    """Say which model runs each served agent, and why (as `toolfleet run` does)."""
    for name, runner in orch.runners.items():
        print(f"{name}: {describe_choice(runner.agent, runner.model)}", flush=True)


async def _serve(
    agents: list[Agent],
    settings: Settings,
    bind: tuple[str, int] | None = None,
    plugins: Sequence[BasePlugin] = (),
) -> None:
    log = logging.getLogger("toolfleet.serve")

    def log_update(session_id: str, update: Update) -> None:
        log.info("session %s: %s", session_id, type(update).__name__)

    stop = stop_on_signals()
    if bind is None:
        async with Orchestrator(agents, settings, on_update=log_update, plugins=plugins) as orch:
            print_models(orch)
            print(f"toolfleet serve: {', '.join(orch.runners)} as {orch.replica_id}", flush=True)
            await stop.wait()
        return
    from toolfleet.orchestrator.httpapi import (  # FastAPI only when asked for
        HttpSettings,
        serve_http,
    )

    http = HttpSettings()
    served = serve_http(agents, settings, http, *bind, on_update=log_update, plugins=plugins)
    async with served as running:
        print_models(running.orch)
        names = ", ".join(running.orch.runners)
        print(f"toolfleet serve: {names} as {running.orch.replica_id}", flush=True)
        auth = (
            "callers identified by bearer token"
            if http.auth_required()
            else "no identities: loopback clients only"
        )
        print(f"http: {running.url} ({auth}; approvals page {running.url}/approvals)", flush=True)
        print(adk_line(running.url), flush=True)
        await stop.wait()


def adk_line(url: str) -> str:
    """Where ADK's clients and dev UI reach the server, or which extra brings the UI."""
    from toolfleet.orchestrator.httpapi.adk_dev_ui import dev_ui_folder
    from toolfleet.orchestrator.httpapi.routes_adk import ADK_PREFIX

    ui = (
        f"dev UI {url}/dev-ui/"
        if dev_ui_folder() is not None
        else "ADK's dev UI: pip install 'toolfleet[adk-web]'"
    )
    return f"adk: {url}{ADK_PREFIX} (ADK api_server's routes; {ui})"


def cmd_serve(args: argparse.Namespace) -> None:
    """`toolfleet serve`: run the `--agent`s until SIGINT/SIGTERM, resuming sessions as their
    calls complete; with `--http`, also serve the HTTP API and approvals page.

    Uses TOOLFLEET_REDIS_URL, else the embedded server of a running `toolfleet run`; it starts
    no server or workers of its own."""
    settings = local_fleet_settings(Settings())
    check_redis(settings.require_redis_url())
    logging.getLogger().setLevel(logging.INFO)
    bind = None
    if args.http is not None:
        from toolfleet.orchestrator.httpapi import HttpSettings, parse_bind

        bind = parse_bind(args.http, HttpSettings())
    agents = [load_agent(spec) for spec in args.agent]
    plugins = [load_plugin(spec) for spec in args.plugin or ()]
    orchestrator_policy()
    event_loop.run(_serve(agents, settings, bind, plugins), settings)


def cmd_worker(args: argparse.Namespace) -> None:
    """`toolfleet worker`: run a Celery worker in this process for the `--pool`s (default: the
    default pool), loading `--tools` or TOOLFLEET_TOOL_MODULES. Returns when the worker exits.

    io pools run on Celery's threads pool (TOOLFLEET_IO_CONCURRENCY calls at once, sync tools'
    on TOOLFLEET_IO_THREADS threads), cpu pools on prefork (4 processes); `--concurrency`
    overrides either. The node name is `--name`, else the pools and this process's pid,
    e.g. default.12345@host; a name a live worker holds is refused (WorkerNameTakenError,
    a ToolfleetError)."""
    settings = Settings()
    if args.tools:
        settings = settings.model_copy(update={"tool_modules": args.tools.split(",")})
    # The orchestrator imports worker code only here.
    from toolfleet.workers.app import create_app
    from toolfleet.workers.command import run_worker
    from toolfleet.workers.names import default_worker_name

    pools = args.pool or [settings.default_pool]
    kind = kind_of_pools(pools, settings)  # before the app: a mixed worker is refused at once
    concurrency = concurrency_for(kind, settings, args.concurrency, CPU_CONCURRENCY)
    app = create_app(settings)
    queues = ",".join(queue_name(p) for p in pools)
    # Task events as TOOLFLEET_TASK_EVENTS says (the app's config): no -E.
    argv = ["-Q", queues, *worker_pool_argv(kind, concurrency)]
    argv += ["--loglevel", args.loglevel]
    # Celery's default, celery@<host>, is one name for every worker on a host.
    argv += ["-n", args.name or default_worker_name(pools)]
    run_worker(app, argv)


def build_parser() -> argparse.ArgumentParser:
    """The parser of `toolfleet` and its subcommands; each sets `func`, the `cmd_*` to run."""
    parser = argparse.ArgumentParser(prog="toolfleet", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the whole system on this machine: fan-out and a ticket")
    demo.add_argument("--timeout", type=float, default=60, help="seconds to wait for the ticket")
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser("run", help="send one message to an agent and print the conversation")
    run.add_argument("--agent", required=True, help="module:attribute of an Agent")
    run.add_argument("--user", default="user", help="user id (default: user)")
    run.add_argument("--session", default=None, help="session id (default: a new session)")
    run.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="processes per embedded cpu-pool worker (io pools: TOOLFLEET_IO_CONCURRENCY calls)",
    )
    run.add_argument("--no-wait", action="store_true", help="do not wait for pending tickets")
    run.add_argument("--wait", type=float, default=3600, help="seconds to wait for tickets")
    run.add_argument(
        "--plugin",
        action="append",
        help="module:attribute of a BasePlugin run around every call (repeatable)",
    )
    run.add_argument("message")
    run.set_defaults(func=cmd_run)

    serve = sub.add_parser("serve", help="run agents as a service: resume sessions on completions")
    serve.add_argument(
        "--agent", required=True, action="append", help="module:attribute (repeatable)"
    )
    serve.add_argument(
        "--http",
        nargs="?",
        const="",
        metavar="HOST:PORT",
        help="also serve the HTTP API and approvals page (alone: TOOLFLEET_HTTP_HOST:PORT, "
        "127.0.0.1:8080); beyond loopback it needs caller identities (TOOLFLEET_HTTP_TOKEN, "
        "TOOLFLEET_HTTP_API_KEYS or JWTs)",
    )
    serve.add_argument(
        "--plugin",
        action="append",
        help="module:attribute of a BasePlugin run around every call (repeatable)",
    )
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run a tool worker (a Celery worker) for some pools")
    worker.add_argument("--pool", action="append", help="pool to serve (repeatable)")
    worker.add_argument("--tools", help="comma-separated tool modules (TOOLFLEET_TOOL_MODULES)")
    worker.add_argument(
        "--concurrency",
        "-c",
        type=int,
        default=None,
        help=f"calls at once: of an io pool (default TOOLFLEET_IO_CONCURRENCY; sync tools' "
        f"on TOOLFLEET_IO_THREADS threads), processes of a cpu pool (default {CPU_CONCURRENCY})",
    )
    worker.add_argument(
        "--name",
        "-n",
        help="Celery node name, unique among live workers, e.g. heavy1@%%h (default: the "
        "pools and this process's pid, e.g. default.12345@<host>)",
    )
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(func=cmd_worker)

    add_ticket_commands(sub)
    add_cancel_command(sub)
    add_mcp_commands(sub)
    add_flower_command(sub)
    add_dev_command(sub)
    status = sub.add_parser("status", help="live workers, pools, queue depths, pending tickets")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(func=cmd_status)
    return parser


def import_from_working_directory() -> None:
    """Put the working directory first on the import path, as `python -m toolfleet` has it
    (and `celery -A`, `uvicorn` do): `--agent app.agents:support` and TOOLFLEET_TOOL_MODULES
    import the user's modules from where the command runs. The `toolfleet` script alone
    would have only its own directory there."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `toolfleet` script: parse `argv` and run the subcommand.

    Returns the exit status: 0; 2 after a ToolfleetError or a Redis connection error, printed
    on stderr without a traceback; 130 on Ctrl-C."""
    args = build_parser().parse_args(argv)
    import_from_working_directory()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if getattr(args, "session", "") is None:
        args.session = uuid.uuid4().hex[:12]
    try:
        if args.func is not cmd_worker:  # a worker configures its own, in its Celery app
            tracing.configure_from_env("toolfleet-orchestrator")
        args.func(args)
    except (ToolfleetError, redis.ConnectionError) as exc:
        print(f"toolfleet: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
