"""The `toolfleet` command: run an agent, start workers."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
import uuid
from collections.abc import Sequence
from contextlib import ExitStack

from orchestrator.agent import Agent
from orchestrator.console import ConsolePrinter
from orchestrator.embedded import EmbeddedRedis
from orchestrator.local_workers import WorkerGroup
from orchestrator.runner import Runner
from shared.celery_config import tool_pool
from shared.config import Settings, gemini_api_key
from shared.errors import ToolfleetError
from shared.keys import queue_name


def load_agent(spec: str) -> Agent:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ToolfleetError(
            f"--agent {spec!r}: expected module:attribute, e.g. examples.weather:agent"
        )
    agent = getattr(importlib.import_module(module_name), attr, None)
    if not isinstance(agent, Agent):
        raise ToolfleetError(f"--agent {spec!r}: {attr} in {module_name} is not an Agent")
    return agent


def pools_of(agent: Agent, settings: Settings) -> list[str]:
    return sorted({tool_pool(t, settings) for t in agent.all_tools()} or {settings.default_pool})


def describe_model(runner: Runner) -> str:
    if gemini_api_key() and runner.agent.model is None:
        return f"model: Gemini {runner.settings.model} (API key from the environment)"
    return f"model: {runner.model.name} (no GOOGLE_API_KEY/GEMINI_API_KEY set)"


def start_local_fleet(
    stack: ExitStack, settings: Settings, pools: Sequence[str], concurrency: int
) -> Settings:
    """Embedded default: a private server and workers for `pools`, stopped with `stack`."""
    server = stack.enter_context(EmbeddedRedis())
    settings = settings.model_copy(update={"redis_url": server.url})
    print(f"embedded server: {server.binary} on {server.url} (no TOOLFLEET_REDIS_URL set)")
    group = stack.enter_context(WorkerGroup(settings))
    for pool in pools:
        worker = group.start([pool], concurrency=concurrency)
        print(f"worker {worker.hostname}: pool {pool}, {concurrency} processes")
    return settings


async def _run(agent: Agent, settings: Settings, args: argparse.Namespace) -> None:
    printer = ConsolePrinter(sys.stdout)
    async with Runner(agent, settings) as runner:
        print(describe_model(runner))
        async for update in runner.run(
            user_id=args.user, session_id=args.session, message=args.message
        ):
            printer.show(update)


def cmd_run(args: argparse.Namespace) -> None:
    settings = Settings()
    agent = load_agent(args.agent)
    module = args.agent.partition(":")[0]
    if module not in settings.tool_modules:
        settings = settings.model_copy(update={"tool_modules": [*settings.tool_modules, module]})
    with ExitStack() as stack:
        if not settings.redis_url:
            settings = start_local_fleet(
                stack, settings, pools_of(agent, settings), args.concurrency
            )
        asyncio.run(_run(agent, settings, args))


def cmd_worker(args: argparse.Namespace) -> None:
    settings = Settings()
    if args.tools:
        settings = settings.model_copy(update={"tool_modules": args.tools.split(",")})
    from workers.app import create_app  # the orchestrator never imports workers otherwise

    app = create_app(settings)
    queues = ",".join(queue_name(p) for p in args.pool or [settings.default_pool])
    argv = ["worker", "-Q", queues, "-c", str(args.concurrency), "-E", "--loglevel", args.loglevel]
    if args.name:
        argv += ["-n", args.name]
    app.worker_main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolfleet", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="send one message to an agent and print the conversation")
    run.add_argument("--agent", required=True, help="module:attribute of an Agent")
    run.add_argument("--user", default="user", help="user id (default: user)")
    run.add_argument("--session", default=None, help="session id (default: a new session)")
    run.add_argument("--concurrency", type=int, default=4, help="processes per embedded worker")
    run.add_argument("message")
    run.set_defaults(func=cmd_run)

    worker = sub.add_parser("worker", help="run a tool worker (a Celery worker) for some pools")
    worker.add_argument("--pool", action="append", help="pool to serve (repeatable)")
    worker.add_argument("--tools", help="comma-separated tool modules (TOOLFLEET_TOOL_MODULES)")
    worker.add_argument("--concurrency", "-c", type=int, default=4)
    worker.add_argument("--name", "-n", help="Celery node name, e.g. heavy1@%%h")
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(func=cmd_worker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if getattr(args, "session", "") is None:
        args.session = uuid.uuid4().hex[:12]
    try:
        args.func(args)
    except ToolfleetError as exc:
        print(f"toolfleet: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
