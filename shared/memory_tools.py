"""ADK's memory tools: `load_memory` (the model searches the user's memory) and
`preload_memory` (memories matching the user's message go with every model call).

Memory is the word match over the user's stored sessions (shared/memory.py), on the
workers (`load_memory` runs there like any tool) and on the orchestrator
(`preload_memory` searches before each model call).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.memory import MemoryEntry
from toolfleet.shared.request_hooks import LlmRequest, RequestContext, text_of_content
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)

_MEMORY_INSTRUCTION = """
You have memory. You can use it to answer questions. If any questions need
you to look up the memory, you should call load_memory function with a query.
"""


def _timestamp(entry: MemoryEntry) -> str:
    """As ADK's memory services write an entry's time: ISO 8601, local time."""
    return datetime.fromtimestamp(entry.timestamp).isoformat()


def _as_json(entry: MemoryEntry) -> dict[str, Any]:
    """ADK's MemoryEntry, as its LoadMemoryResponse serializes one."""
    return {
        "content": entry.content.model_dump(mode="json", exclude_none=True),
        "author": entry.author,
        "timestamp": _timestamp(entry),
    }


async def _load_memory(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Loads the memory for the current user.

    Args:
      query: The query to load the memory for.

    Returns:
      A list of memory results.
    """
    found = await tool_context.search_memory(query)
    return {"memories": [_as_json(m) for m in found.memories]}


@dataclass(frozen=True, eq=False)
class LoadMemoryTool(FunctionTool):
    """ADK's LoadMemoryTool: `load_memory` runs on a worker; before each model call the
    agent is told it has memory."""

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        """Tell the model about the memory."""
        llm_request.append_instructions([_MEMORY_INSTRUCTION])


class PreloadMemoryTool(BaseTool):
    """ADK's PreloadMemoryTool: never offered to the model nor run; before each model
    call, the memories matching the user's message go into the system instruction."""

    def __init__(self) -> None:
        super().__init__(name="preload_memory", description="preload_memory")

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        """Search the memory for the user's message; add what is found."""
        query = text_of_content(tool_context.user_content)
        if not query:
            return
        try:
            found = await tool_context.search_memory(query)
        except Exception:  # as ADK: no memory is no reason to fail the model call
            log.warning("could not preload memory (query length %d)", len(query), exc_info=True)
            return
        lines: list[str] = []
        for memory in found.memories:
            if memory.timestamp:
                lines.append(f"Time: {_timestamp(memory)}")
            text = text_of_content(memory.content)
            if text:
                lines.append(f"{memory.author}: {text}" if memory.author else text)
        if not lines:
            return
        past = "\n".join(lines)
        llm_request.append_instructions(
            [
                "The following content is from your previous conversations with the user.\n"
                "They may be useful for answering the user's current query.\n"
                f"<PAST_CONVERSATIONS>\n{past}\n</PAST_CONVERSATIONS>\n"
            ]
        )


# ADK's `google.adk.tools.load_memory` and `preload_memory` are the tools, as here.
load_memory = LoadMemoryTool(_load_memory, "load_memory")
preload_memory = PreloadMemoryTool()
