"""The local fleet of InMemorySessionService: TOOLFLEET_REDIS_URL when set, else a
private server and workers started on first use, stopped when the program exits."""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.orchestrator.cli.launch import specs_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.signing import new_fleet_key

CPU_CONCURRENCY = 2  # processes per cpu pool, as `toolfleet run` starts by default


def _defines(module: str, tool: object) -> bool:
    """Whether `module` registers `tool` on a worker: `tool` itself is a module-level name
    of it, or a module-level FunctionTool of it runs the same function (a built-in given
    as a plain function, as ADK's `exit_loop` is, is wrapped anew by each agent)."""
    func = getattr(tool, "func", None)
    return any(
        value is tool or (func is not None and getattr(value, "func", None) is func)
        for value in vars(sys.modules[module]).values()
    )


def tool_modules_of(agent: Agent) -> tuple[list[str], list[str]]:
    """(modules, extra import paths) the workers need for `agent`'s tools.

    A tool defined in the script being run lives in `__main__`, which a worker cannot
    import by that name: it imports the script's module name (`python -m`) or, for
    `python path/script.py`, the file's stem with its directory on the import path.
    """
    names: set[str] = set()
    modules, paths = set(), set()
    for tool in agent.all_tools():
        # An agent tool's function is toolfleet's: the module that made it is the one.
        name = getattr(tool, "defined_in", "") or getattr(tool.func, "__module__", "") or ""
        if name.startswith("toolfleet.") and _defines(name, tool):
            modules.add(name)  # a built-in the workers run (load_memory): its module serves it
        names.add(name)
    for each in agent.walk():
        names |= {type(toolset).__module__ for toolset in each.toolsets}
    for name in names - {""}:
        if name.startswith("toolfleet."):
            continue  # toolfleet's own wrappers: the workers have them
        if name != "__main__":
            modules.add(name)
            continue
        main = sys.modules["__main__"]
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            modules.add(spec.name)
        else:
            script = Path(getattr(main, "__file__", "") or "").resolve()
            modules.add(script.stem)
            paths.add(str(script.parent))
    return sorted(modules), sorted(paths)


class LocalFleet:
    """Settings for sessions of the local default, starting what they need once."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()  # ADK's sync `run` calls from threads of its own
        self._stack: ExitStack | None = None
        self._served: set[tuple[str, str]] = set()  # (module, pool) some worker serves

    async def settings_for(self, agent: Agent | None) -> Settings:
        """The settings; without TOOLFLEET_REDIS_URL, start the private server (and
        workers for `agent`'s tools) first, off the event loop: it waits for them."""
        if self._settings.redis_url and self._stack is None:
            return self._settings  # the fleet there serves the agents
        return await asyncio.to_thread(self._start, agent)

    def _start(self, agent: Agent | None) -> Settings:
        with self._lock:
            if self._stack is None:
                self._stack = ExitStack()
                atexit.register(self._stack.close)
                server = self._stack.enter_context(EmbeddedRedis())
                self._settings = self._settings.model_copy(
                    update={
                        "redis_url": server.url,
                        "credential_key": self._settings.credential_key or new_credential_key(),
                        "fleet_key": self._settings.fleet_key or new_fleet_key(),
                    }
                )
            if agent is not None:
                self._start_workers(agent)
            return self._settings

    def _start_workers(self, agent: Agent) -> None:
        modules, paths = tool_modules_of(agent)
        settings = self._settings.model_copy(update={"tool_modules": modules})
        pools = sorted({tool_pool(t, settings) for t in agent.all_tools()})
        wanted = {(module, pool) for module in modules for pool in pools}
        if wanted <= self._served:
            return  # no tools of its own, or all served by workers started before
        assert self._stack is not None
        path = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH", "")])])
        group = self._stack.enter_context(
            WorkerGroup(settings, extra_env={"PYTHONPATH": path} if paths else {})
        )
        group.start_all(specs_for(pools, settings, CPU_CONCURRENCY))
        self._served |= wanted
