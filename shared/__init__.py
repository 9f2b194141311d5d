"""Contracts shared by the orchestrator and the workers."""

from shared.config import Settings
from shared.context import State, ToolContext
from shared.errors import (
    ConfigError,
    DispatchError,
    ModelError,
    ResultTimeoutError,
    SessionError,
    ToolDefinitionError,
    ToolError,
    ToolfleetError,
)
from shared.messages import CallStatus, ToolActions, ToolCall, ToolResult
from shared.tools import FunctionTool, LongRunningFunctionTool, ToolOptions, as_tool, tool

__all__ = [
    "CallStatus",
    "ConfigError",
    "DispatchError",
    "FunctionTool",
    "LongRunningFunctionTool",
    "ModelError",
    "ResultTimeoutError",
    "SessionError",
    "Settings",
    "State",
    "ToolActions",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolOptions",
    "ToolResult",
    "ToolfleetError",
    "as_tool",
    "tool",
]
