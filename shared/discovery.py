"""Find the tools and jobs defined in the modules named in settings."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from toolfleet.shared.definition_imports import definitions_import
from toolfleet.shared.errors import ConfigError, ToolDefinitionError
from toolfleet.shared.jobs import Job
from toolfleet.shared.tools import FunctionTool, ToolRegistry, ToolSource

log = logging.getLogger(__name__)


def tools_in_module(module: ModuleType) -> list[FunctionTool]:
    """Every FunctionTool at module level and every tool of a ToolSource (agent, toolset).

    A source that cannot list its tools (a broken toolset) is logged as an error naming
    it, and its tools are not served; it neither stops the worker nor hides the
    module's other tools.
    """
    found: list[FunctionTool] = []
    for attr, value in vars(module).items():
        if isinstance(value, FunctionTool):
            found.append(value)
        elif isinstance(value, ToolSource) and not isinstance(value, type):
            try:
                for tool in value.all_tools():
                    found.append(tool)  # kept even if the source fails further on
            except Exception as exc:
                log.error(
                    "tool module %s: %s (%s) cannot list its tools, so they are not served: %s: %s",
                    module.__name__,
                    attr,
                    type(value).__qualname__,
                    type(exc).__name__,
                    exc,
                )
    return found


def jobs_in_module(module: ModuleType) -> list[Job]:
    """Every Job (a `@job` function) defined at module level."""
    return [value for value in vars(module).values() if isinstance(value, Job)]


@dataclass(frozen=True)
class Definitions:
    """The tools and the jobs (by name) of the tool modules: what a worker registers as tasks."""

    tools: ToolRegistry
    jobs: dict[str, Job]


def import_modules(names: Iterable[str]) -> list[ModuleType]:
    """Import the named modules; one that cannot be imported raises ConfigError naming it."""
    modules = []
    for name in names:
        try:
            with definitions_import(name):
                modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise ConfigError(
                f"tool module {name!r} (TOOLFLEET_TOOL_MODULES) cannot be imported: {exc}"
            ) from exc
    return modules


def load_definitions(module_names: Iterable[str]) -> Definitions:
    """Import the tool modules and collect their tools and jobs.

    Raises ToolDefinitionError when two different tools, or two jobs, share a name.
    """
    modules = import_modules(module_names)
    tools = ToolRegistry(t for m in modules for t in tools_in_module(m))
    jobs: dict[str, Job] = {}
    for found in (j for m in modules for j in jobs_in_module(m)):
        if jobs.setdefault(found.name, found) is not found:
            raise ToolDefinitionError([f"duplicate job name {found.name!r}"])
    return Definitions(tools, jobs)
