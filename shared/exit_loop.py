"""ADK's `exit_loop` tool: a LoopAgent's sub-agent calls it to end the loop."""

from __future__ import annotations

from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import FunctionTool


def exit_loop(tool_context: ToolContext) -> None:
    """Exits the loop.

    Call this function only when you are instructed to do so.

    Args:
        tool_context: The call's context, passed in by the worker: the call sets its
            actions' `escalate` (the LoopAgent stops after this agent) and
            `skip_summarization`.
    """
    # ADK's: the LoopAgent stops after this agent; its response is the agent's answer.
    tool_context.actions.escalate = True
    tool_context.actions.skip_summarization = True


# What a worker that loads this module registers: agents take `exit_loop` as a plain
# function and wrap it themselves, so the module offers the tool too.
EXIT_LOOP_TOOL = FunctionTool(exit_loop)
