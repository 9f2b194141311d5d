"""BasePlugin: app-wide callbacks around every model and tool call, as ADK's.

A plugin is given to the Runner (`Runner(agent, settings, plugins=[...])`) and runs on
the orchestrator for every agent of the app, before the agent's own callbacks: the
first plugin that returns a value decides, and the agent's callback is then skipped.
"""

from __future__ import annotations

from typing import Any

from google.genai import types

from toolfleet.orchestrator.plugins.context import CallbackContext, LlmRequest, LlmResponse
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import FunctionTool


class BasePlugin:
    """Subclass and override the callbacks you need; each returns None to let the call
    go on as it is. All run on the orchestrator, never on a worker.

    Args:
        name: The plugin's name; must not be empty.

    Raises:
        ValueError: `name` is empty.
    """

    def __init__(self, name: str) -> None:
        if not name:
            raise ValueError("a plugin needs a name (BasePlugin(name='...'))")
        self.name = name

    async def before_agent_callback(
        self, *, agent: Any, callback_context: CallbackContext
    ) -> types.Content | None:
        """When an agent starts the invocation or is handed it (ADK's); a Content is
        its answer and it does not run."""
        return None

    async def after_agent_callback(
        self, *, agent: Any, callback_context: CallbackContext
    ) -> types.Content | None:
        """Once the invocation has its answer, for each agent that ran; a Content is
        stored as an event after it."""
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Before each model call; an LlmResponse answers in the model's place."""
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """After each model call; an LlmResponse replaces the model's."""
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        """When a model call fails (ModelError); an LlmResponse answers in its place."""
        return None

    async def before_tool_callback(
        self, *, tool: FunctionTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Before a call is dispatched; a dict is its response and it is never dispatched."""
        return None

    async def after_tool_callback(
        self,
        *,
        tool: FunctionTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: Any,
    ) -> Any:
        """After a call's final response is in. `result` is what the tool returned (a
        value that is not a dict as it is, as ADK passes it); what is returned, unless
        None, replaces it (a value that is not a dict goes to the model as
        {"result": value})."""
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: FunctionTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """When a dispatched call's response is an error; a dict replaces it."""
        return None

    async def after_run_callback(self, *, invocation_context: CallbackContext) -> None:
        """When an invocation ends, however it ends (to drop what was kept for it)."""
        return None
