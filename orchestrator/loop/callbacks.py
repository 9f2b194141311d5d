"""The chains of callbacks around model and tool calls: the app's plugins first, then
the agent's own callbacks (ADK's order); the first that returns a value decides."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.genai import types

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.base_llm import answered
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.context import CallbackContext, LlmRequest, LlmResponse
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ModelError
from toolfleet.shared.tools import FunctionTool

_T = TypeVar("_T")

MODEL_HOOKS = ("before_model_callback", "after_model_callback", "on_model_error_callback")
TOOL_HOOKS = ("before_tool_callback", "after_tool_callback", "on_tool_error_callback")


@dataclass(frozen=True)
class Hooks:
    """One agent's callbacks and the app's plugins, called in ADK's order."""

    agent: Agent
    plugins: Sequence[BasePlugin] = ()

    def any_of(self, hooks: Sequence[str]) -> bool:
        """Whether a plugin or one of the agent's callbacks may answer one of `hooks`;
        if not, the caller skips building what they would be given."""
        return bool(self.plugins) or any(getattr(self.agent, hook) for hook in hooks)

    async def before_model(
        self, context: CallbackContext, request: LlmRequest
    ) -> LlmResponse | None:
        """An LlmResponse that answers in the model's place, or None to call the model."""
        kwargs = {"callback_context": context, "llm_request": request}
        return await self._first("before_model_callback", LlmResponse, kwargs, kwargs)

    async def after_model(self, context: CallbackContext, response: LlmResponse) -> LlmResponse:
        """The model's answer, or what a callback replaced it with."""
        kwargs = {"callback_context": context, "llm_response": response}
        answer = await self._first("after_model_callback", LlmResponse, kwargs, kwargs)
        return response if answer is None else answer

    async def generate(
        self,
        generating: Callable[[], Awaitable[types.Content]],
        context: CallbackContext | None,
        request: LlmRequest,
    ) -> types.Content:
        """The model's turn (`generating()` makes the call); if it fails with ModelError,
        what an on_model_error callback answers in its place (ADK's), else the error."""
        try:
            return await generating()
        except ModelError as error:
            if context is None:
                raise
            kwargs = {"callback_context": context, "llm_request": request, "error": error}
            answer = await self._first("on_model_error_callback", LlmResponse, kwargs, kwargs)
            if answer is None:
                raise
            return answered(answer, "on_model_error_callback")

    async def before_tool(
        self, tool: FunctionTool, args: dict[str, Any], context: ToolContext
    ) -> dict[str, Any] | None:
        """A response that short-circuits the call, or None to dispatch it."""
        return await self._first(
            "before_tool_callback",
            dict,
            {"tool": tool, "tool_args": args, "tool_context": context},
            {"tool": tool, "args": args, "tool_context": context},
        )

    async def after_tool(
        self, tool: FunctionTool, args: dict[str, Any], context: ToolContext, result: Any
    ) -> Any:
        """What replaces `result` (any value but None, as ADK takes it), or None to keep
        it. `result` is what the tool returned: a dict, or a value of another type."""
        return await self._first(
            "after_tool_callback",
            object,
            {"tool": tool, "tool_args": args, "tool_context": context, "result": result},
            {"tool": tool, "args": args, "tool_context": context, "tool_response": result},
        )

    async def on_tool_error(
        self, tool: FunctionTool, args: dict[str, Any], context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """A response that replaces the error response, or None to keep it."""
        return await self._first(
            "on_tool_error_callback",
            dict,
            {"tool": tool, "tool_args": args, "tool_context": context, "error": error},
            {"tool": tool, "args": args, "tool_context": context, "error": error},
        )

    async def _first(
        self,
        hook: str,
        kind: type[_T],
        plugin_kwargs: dict[str, Any],
        agent_kwargs: dict[str, Any],
    ) -> _T | None:
        """The chain of `hook`: each plugin's method of that name (ADK's plugin keywords),
        then the agent's callbacks of that setting (ADK's agent keywords); the first answer
        that is not None, checked to be a `kind`."""
        for plugin in self.plugins:
            answer = await getattr(plugin, hook)(**plugin_kwargs)
            if answer is not None:
                return _checked(answer, kind, plugin.name, hook)
        for callback in listed(getattr(self.agent, hook)):
            answer = await called(callback, **agent_kwargs)
            if answer is not None:
                return _checked(answer, kind, _name(callback), hook)
        return None

    async def after_run(self, context: CallbackContext) -> None:
        """Tell every plugin that the invocation ended."""
        for plugin in self.plugins:
            await plugin.after_run_callback(invocation_context=context)


def listed(spec: Callable[..., Any] | Sequence[Callable[..., Any]] | None) -> list[Any]:
    """An agent's callback setting as a list: ADK takes one callable or a list of them."""
    if spec is None:
        return []
    if callable(spec):
        return [spec]
    return list(spec)


async def called(callback: Callable[..., Any], **kwargs: Any) -> Any:
    """Call a sync or async callback with ADK's keyword arguments."""
    answer = callback(**kwargs)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def _checked(answer: object, kind: type[_T], who: str, hook: str) -> _T:
    if not isinstance(answer, kind):
        raise TypeError(
            f"{hook} {who!r} returned {type(answer).__name__}: return a {kind.__name__} or None"
        )
    return answer


def _name(callback: Callable[..., Any]) -> str:
    return getattr(callback, "__qualname__", repr(callback))
