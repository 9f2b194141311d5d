"""Callbacks around model and tool calls, per agent and app-wide (ADK's plugins)."""

from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.context import (
    CallbackContext,
    LlmRequest,
    LlmResponse,
    ToolCallError,
)
from toolfleet.orchestrator.plugins.retry import ReflectAndRetryToolPlugin

__all__ = [
    "BasePlugin",
    "CallbackContext",
    "LlmRequest",
    "LlmResponse",
    "ReflectAndRetryToolPlugin",
    "ToolCallError",
]
