"""ADK's `get_user_choice`: the model offers options and the user picks one.

A long-running tool: the call answers pending at once, and the user's choice is
posted as its final result like any long-running call's (a ticket's completion, or
a FunctionResponse message to ADK's Runner); the model then sees the choice. Its result
is the user's to give: over HTTP the session's user may post it.
"""

from __future__ import annotations

from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import LongRunningFunctionTool


def _get_user_choice(options: list[str], tool_context: ToolContext) -> str | None:
    """Provides the options to the user and asks them to choose one."""
    tool_context.actions.skip_summarization = True
    return None


# ADK's `google.adk.tools.get_user_choice` is the tool, as here.
get_user_choice = LongRunningFunctionTool(
    _get_user_choice, name="get_user_choice", answered_by_user=True
)
