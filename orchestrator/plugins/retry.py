"""ReflectAndRetryToolPlugin: let the model correct a failing call a few times, as ADK's."""

from __future__ import annotations

from typing import Any

from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.context import CallbackContext, ToolCallError
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import FunctionTool

# What the model reads with an error it may retry (ADK's response_type, so a program
# that looks for it finds it).
HANDLED = "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN"


class ReflectAndRetryToolPlugin(BasePlugin):
    """Turns a tool's error into guidance to reflect and call again, up to `max_retries`
    times per tool per invocation; after that the error response stands as it is.

    Counts are kept on the orchestrator running the invocation (an invocation that
    another replica resumes starts counting again) and dropped when it ends.

    Args:
        name: The plugin's name.
        max_retries: Most errors of one tool in one invocation answered with guidance;
            0: none.

    Raises:
        ValueError: `max_retries` is negative.
    """

    def __init__(self, name: str = "reflect_retry_tool_plugin", max_retries: int = 3) -> None:
        super().__init__(name)
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {max_retries}")
        self.max_retries = max_retries
        self._failures: dict[str, dict[str, int]] = {}  # invocation id -> tool -> errors

    async def on_tool_error_callback(
        self,
        *,
        tool: FunctionTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Guidance while retries are left for this tool in this invocation; else None."""
        counts = self._failures.setdefault(tool_context.invocation_id, {})
        counts[tool.name] = failures = counts.get(tool.name, 0) + 1
        if failures > self.max_retries:
            return None  # the error stands
        error_type = error.error_type if isinstance(error, ToolCallError) else type(error).__name__
        message = error.error_message if isinstance(error, ToolCallError) else str(error)
        return {
            "status": "error",
            "error_type": error_type,
            "error_message": message,
            "response_type": HANDLED,
            "retry_count": failures,
            "reflection_guidance": (
                f"The call to {tool.name!r} failed ({error_type}: {message}); this is "
                f"retry {failures} of {self.max_retries}. Reflect on the error and the "
                "arguments you passed, then call the tool again with corrected arguments, "
                "or choose another approach."
            ),
        }

    async def after_run_callback(self, *, invocation_context: CallbackContext) -> None:
        """The invocation ended: its counts are no longer needed."""
        self._failures.pop(invocation_context.invocation_id, None)
