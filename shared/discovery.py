"""Find the tools defined in the modules named in settings."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

from shared.errors import ConfigError
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


def load_tools(module_names: Iterable[str]) -> ToolRegistry:
    tools: list[FunctionTool] = []
    for name in module_names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(
                f"tool module {name!r} (TOOLFLEET_TOOL_MODULES) cannot be imported: {exc}"
            ) from exc
        tools.extend(tools_in_module(module))
    return ToolRegistry(tools)
