"""Find the tools and jobs defined in the modules named in settings."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from shared.errors import ConfigError, ToolDefinitionError
from shared.jobs import Job
from shared.tools import FunctionTool, ToolRegistry, ToolSource


def tools_in_module(module: ModuleType) -> list[FunctionTool]:
    """Every FunctionTool at module level and every tool of a ToolSource (agent, toolset)."""
    found: list[FunctionTool] = []
    for value in vars(module).values():
        if isinstance(value, FunctionTool):
            found.append(value)
        elif isinstance(value, ToolSource) and not isinstance(value, type):
            found.extend(value.all_tools())
    return found


def jobs_in_module(module: ModuleType) -> list[Job]:
    return [value for value in vars(module).values() if isinstance(value, Job)]


@dataclass(frozen=True)
class Definitions:
    tools: ToolRegistry
    jobs: dict[str, Job]


def import_modules(names: Iterable[str]) -> list[ModuleType]:
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise ConfigError(
                f"tool module {name!r} (TOOLFLEET_TOOL_MODULES) cannot be imported: {exc}"
            ) from exc
    return modules


def load_definitions(module_names: Iterable[str]) -> Definitions:
    modules = import_modules(module_names)
    tools = ToolRegistry(t for m in modules for t in tools_in_module(m))
    jobs: dict[str, Job] = {}
    for found in (j for m in modules for j in jobs_in_module(m)):
        if jobs.setdefault(found.name, found) is not found:
            raise ToolDefinitionError([f"duplicate job name {found.name!r}"])
    return Definitions(tools, jobs)
