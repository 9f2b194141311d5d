"""Dropping identical calls of one turn (same tool, same arguments), as ADK's
`dedupe_tool_calls`: only the first runs, and each copy gets its response."""

from __future__ import annotations

import json

from toolfleet.shared.messages import ToolActions, ToolCall, ToolResult
from toolfleet.shared.tools import FunctionTool


class Duplicates:
    """The calls of one turn that repeat an earlier one (TOOLFLEET_DEDUPE_TOOL_CALLS).

    A long-running call is never dropped: its ticket belongs to its own call id, and a
    copy could never be completed; nor is a call a person must confirm (each is asked).
    """

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._first: dict[tuple[str, str], str] = {}  # (tool, args JSON) -> first call id
        self._copies: dict[str, list[ToolCall]] = {}  # first call id -> its dropped copies

    def drop(self, call: ToolCall, tool: FunctionTool) -> bool:
        """Whether `call` repeats an earlier call of the turn (then it is not dispatched)."""
        if not self._enabled or tool.is_long_running or tool.require_confirmation:
            return False
        key = (call.tool, json.dumps(call.args, sort_keys=True, default=str))
        first = self._first.setdefault(key, call.call_id)
        if first == call.call_id:
            return False
        self._copies.setdefault(first, []).append(call)
        return True

    def copies(self, result: ToolResult) -> list[ToolResult]:
        """The results of the calls dropped as copies of `result`'s call: its response,
        without its state writes and actions (they apply once, with the first call)."""
        return [
            result.model_copy(
                update={
                    "call_id": copy.call_id,
                    "state_delta": {},
                    "actions": ToolActions(
                        requested_auth=result.actions.requested_auth,
                        requested_confirmation=result.actions.requested_confirmation,
                    ),
                }
            )
            for copy in self._copies.get(result.call_id, [])
        ]
