"""What the loop needs of a fleet: run validated calls, yield one result per call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from toolfleet.orchestrator.sessions.leases import Fence
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.messages import ToolCall, ToolResult, error_result
from toolfleet.shared.tools import FunctionTool


@dataclass(frozen=True)
class PlannedCall:
    """A validated call and the tool that will run it."""

    call: ToolCall
    tool: FunctionTool


class ToolRunner(Protocol):
    """Runs validated calls somewhere and yields one result per call, as they finish."""

    def run(
        self, calls: Sequence[PlannedCall], *, resume: bool = False, fence: Fence | None = None
    ) -> AsyncIterator[ToolResult]:
        """`resume`: the calls are those of a turn whose invocation died; run only what
        was never sent, and collect the results of the others. `fence`: the session's
        lease, which must still be held when the calls are sent."""
        ...

    async def settle(self, session_id: str) -> None:
        """The results yielded so far are persisted; their transport may forget them."""

    def stage_settle(self, session_id: str, batch: WriteBatch) -> None:
        """`settle` as commands of the transaction that persists the results."""


def failed(call: ToolCall, error_type: str, message: str) -> ToolResult:
    """An error result made by the orchestrator (the call never ran, or timed out)."""
    return error_result(call, error_type, message, worker="orchestrator")
