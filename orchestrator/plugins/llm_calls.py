"""The ceiling on one run's model calls (ADK's RunConfig.max_llm_calls), as a plugin.

A run's ceiling goes with its calls (ToolCall.max_llm_calls): an agent tool's run obeys
it too, counted on its own, and passing it there ends the calling run as well.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.context import CallbackContext, LlmRequest, LlmResponse
from toolfleet.shared.messages import CallStatus, ToolResult


class LlmCallsLimitExceededError(Exception):
    """A run asked the model more often than its RunConfig's `max_llm_calls` allows."""


class LlmCallLimit(BasePlugin):
    """Counts one run's model calls; the call past `limit` raises, as ADK's does. Runs
    after the app's plugins: a call one of them answers is not the model's."""

    def __init__(self, limit: int) -> None:
        super().__init__(name="toolfleet_llm_call_limit")
        self.limit = limit
        self.calls = 0

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Count this call; raise once the run has made `limit` already."""
        self.calls += 1
        if 0 < self.limit < self.calls:
            raise LlmCallsLimitExceededError(
                f"Max number of llm calls limit of `{self.limit}` exceeded"
            )
        return None


def ceiling_of(plugins: Iterable[BasePlugin]) -> int | None:
    """The `max_llm_calls` of a run with `plugins` (its LlmCallLimit's); None: it has none."""
    return next((p.limit for p in plugins if isinstance(p, LlmCallLimit)), None)


def limited(ceiling: int | None) -> tuple[BasePlugin, ...]:
    """The plugins that hold a run to `ceiling` model calls, counted from 0; none for None."""
    return () if ceiling is None else (LlmCallLimit(ceiling),)


def exceeded_in(
    plugins: Iterable[BasePlugin], results: Iterable[ToolResult]
) -> LlmCallsLimitExceededError | None:
    """The error of a call whose run (an agent tool's) passed the ceiling that a run with
    `plugins` handed it, as its worker reported it and no on_tool_error callback answered
    it; None if no call did, or the run has no ceiling to hand."""
    if ceiling_of(plugins) is None:
        return None
    for result in results:
        response = result.response
        if (
            result.status is CallStatus.ERROR
            and response.get("error_type") == LlmCallsLimitExceededError.__name__
        ):
            return LlmCallsLimitExceededError(str(response.get("error_message", "")))
    return None
