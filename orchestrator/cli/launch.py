"""What the CLI needs to start things: agents by name, the embedded fleet, the Redis URL."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
from collections.abc import Sequence
from contextlib import ExitStack

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.dev_record import DevFleet, running_dev_fleet
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis, embedded_url
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.definition_imports import definitions_import
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.errors import ConfigError, ToolfleetError
from toolfleet.shared.signing import new_fleet_key


def _named(spec: str, option: str, example: str) -> tuple[object, str, str]:
    """(the object, its module, its attribute) that `spec`, "module:attribute", names;
    the module imported as a definitions import (its module-level client code inert).

    Raises ToolfleetError, saying which, if the form is wrong or the module does not import.
    """
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ToolfleetError(f"{option} {spec!r}: expected module:attribute, e.g. {example}")
    try:
        with definitions_import(module_name):
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolfleetError(f"{option} {spec!r}: cannot import {module_name}: {exc}") from exc
    return getattr(module, attr, None), module_name, attr


def load_agent(spec: str) -> Agent:
    """Import the Agent named by `spec`, "module:attribute" (e.g. examples.weather:agent).

    Raises ToolfleetError, saying which, if the form is wrong, the module does not import, or
    the attribute is not an Agent."""
    agent, module_name, attr = _named(spec, "--agent", "examples.weather:agent")
    if not isinstance(agent, Agent):
        module = importlib.import_module(module_name)  # imported already, by _named
        agents = sorted(n for n, v in vars(module).items() if isinstance(v, Agent))
        offered = f"its agents: {', '.join(agents)}" if agents else "it defines no Agent"
        problem = "is not an Agent" if hasattr(module, attr) else "has no such name"
        raise ToolfleetError(f"--agent {spec!r}: {attr} in {module_name} {problem} ({offered})")
    return agent


def load_plugin(spec: str) -> BasePlugin:
    """Import the plugin named by `spec`, "module:attribute" (a BasePlugin instance).

    Raises ToolfleetError, saying which, if the form is wrong, the module does not import, or
    the attribute is not a BasePlugin."""
    plugin, module_name, attr = _named(spec, "--plugin", "app.plugins:retry")
    if not isinstance(plugin, BasePlugin):
        raise ToolfleetError(
            f"--plugin {spec!r}: {attr} in {module_name} is not a BasePlugin instance"
        )
    return plugin


def pools_of(agent: Agent, settings: Settings) -> list[str]:
    """Pools serving the agent's tools and the background jobs of its tool modules."""
    pools = {tool_pool(t, settings) for t in agent.all_tools()}
    pools |= {j.pool for j in load_definitions(settings.tool_modules).jobs.values()}
    return sorted(pools or {settings.default_pool})


def specs_for(pools: Sequence[str], settings: Settings, cpu_concurrency: int) -> list[WorkerSpec]:
    """The embedded workers of `pools`: one of `cpu_concurrency` processes per cpu pool,
    EMBEDDED_IO_PROCESSES per io pool, each running the settings' io concurrency."""
    specs: list[WorkerSpec] = []
    for pool in pools:
        if settings.pool_kind(pool) == "cpu":
            specs.append(WorkerSpec([pool], cpu_concurrency))
        else:
            specs += [WorkerSpec([pool])] * EMBEDDED_IO_PROCESSES
    return specs


# io worker processes the embedded default starts per io pool. One runs a wide turn's
# coroutine calls on its event loop, but admitting and concluding them is Python work
# under one GIL: a second process on another core halves it for a turn of thousands.
EMBEDDED_IO_PROCESSES = min(2, os.cpu_count() or 1)


def start_local_fleet(
    stack: ExitStack, settings: Settings, specs: Sequence[WorkerSpec], *, publish_url: bool = True
) -> Settings:
    """Embedded default: a private server and workers for `pools`, stopped with `stack`.
    `publish_url`: leave the server's URL for other toolfleet commands (`toolfleet serve`)."""
    server = stack.enter_context(EmbeddedRedis(publish_url=publish_url))
    # Credentials supplied in this run are encrypted with a key that lives as long as it.
    key = settings.credential_key or new_credential_key()
    fleet_key = settings.fleet_key or new_fleet_key()  # this run's workers sign with it
    settings = settings.model_copy(
        update={"redis_url": server.url, "credential_key": key, "fleet_key": fleet_key}
    )
    print(f"embedded server: {server.binary} on {server.url} (no TOOLFLEET_REDIS_URL set)")
    group = stack.enter_context(WorkerGroup(settings))
    for worker in group.start_all(specs):
        pools = ", ".join(worker.pools)
        runs = f"{worker.concurrency} processes"
        if worker.kind == "io":
            threads = min(settings.io_threads, worker.concurrency)
            runs = f"{worker.concurrency} calls at once (sync tools' on {threads} threads)"
        print(f"worker {worker.hostname}: pool {pools} ({worker.kind}), {runs}")
    return settings


def redis_url_or_embedded_file(settings: Settings) -> str:
    """TOOLFLEET_REDIS_URL, else the server of a running `toolfleet dev`, else the embedded
    server a running `toolfleet run` or `demo` published."""
    return local_fleet_settings(settings).require_redis_url()


def local_fleet_settings(settings: Settings) -> Settings:
    """`settings` as they are when they name a Redis URL; else pointed at the running dev
    fleet (with the keys its workers use), else at the embedded server a running `toolfleet
    run` or `demo` published.

    Raises ConfigError, saying how to get one, when there is none of them."""
    if settings.redis_url:
        return settings
    dev = running_dev_fleet()
    if dev is not None:
        return dev.settings(settings)
    url = embedded_url()
    if url is None:
        raise ConfigError(
            "TOOLFLEET_REDIS_URL is not set and no embedded server is running: set it to "
            "your Redis (redis://host:6379/0), or start `toolfleet dev` (or `toolfleet run`) "
            "first"
        )
    return settings.model_copy(update={"redis_url": url})


def check_dev_serves(dev: DevFleet, agent: Agent, spec: str, settings: Settings) -> None:
    """Raise ConfigError unless the dev fleet's workers load the tools of `agent` (named
    `spec`): a worker of a pool that lacks a tool answers its calls with an error."""
    module = spec.partition(":")[0]
    missing = sorted(set(pools_of(agent, settings)) - set(dev.pools))
    if module not in dev.tool_modules or missing:
        raise ConfigError(
            f"the dev fleet (toolfleet dev, pid {dev.pid}) does not run {spec}'s tools: "
            f"restart it with them, `toolfleet dev stop && toolfleet dev --agent {spec}`, "
            "or set TOOLFLEET_REDIS_URL to a fleet that does"
        )


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM, for a command that serves until stopped (call it
    on the running event loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
