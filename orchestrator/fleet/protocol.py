"""What the loop needs of a fleet: run validated calls, yield one result per call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.cancellation import cancelled_response
from toolfleet.shared.keys import SessionKey
from toolfleet.shared.messages import (
    CallStatus,
    ToolCall,
    ToolResult,
    answered_result,
    error_result,
)
from toolfleet.shared.tools import FunctionTool


@dataclass(frozen=True)
class PlannedCall:
    """A validated call and the tool that will run it."""

    call: ToolCall
    tool: FunctionTool
    parent: str | None = None  # W3C traceparent of the invocation's span (tracing on)


# Stages commands into the batch that sends a turn's first calls; what it returns is called
# with that write's replies once it is done.
WithFirstSend = Callable[[WriteBatch], Callable[[Sequence[Any]], Awaitable[None]]]


class ToolRunner(Protocol):
    """Runs validated calls somewhere and yields one result per call, as they finish."""

    def run(
        self,
        calls: Sequence[PlannedCall],
        *,
        resume: bool = False,
        fence: Fence | None = None,
        with_first_send: WithFirstSend | None = None,
        more: AsyncIterator[Sequence[PlannedCall]] | None = None,
    ) -> AsyncIterator[ToolResult]:
        """`resume`: the calls are those of a turn whose invocation died; run only what
        was never sent, and collect the results of the others. `fence`: the session's
        lease, which must still be held when the calls are sent. `with_first_send`: writes
        (the model turn) to make in the same atomic step as sending the first calls; a
        runner that sends nothing through Redis may ignore it (the loop then writes them
        alone). `more`: the turn's further calls, checked as they are asked for: run them
        too, asking for the next ones between sends, and all of them before waiting for a
        result (the loop tells what was sent before telling a result)."""
        ...

    async def settle(self, session: SessionKey) -> None:
        """The results yielded so far are persisted; their transport may forget them."""

    def stage_settle(self, session: SessionKey, batch: WriteBatch) -> None:
        """`settle` as commands of the transaction that persists the results."""

    def cancel(self, session: SessionKey) -> None:
        """The session was cancelled: every call of it still awaited gets a Cancelled
        error result at once (`run` yields them, and sends none of its calls not sent
        yet); a result that arrives later is dropped."""

    async def stop(self, session: SessionKey, call_ids: Sequence[str]) -> None:
        """Tell the workers to stop these calls of the session, answered (and closed)
        already: a call on a prefork worker is terminated, a coroutine on an io worker
        cancelled."""


def cancelled(call: ToolCall) -> ToolResult:
    """The answer to a call stopped by its session's cancellation."""
    response = cancelled_response(call.tool)
    return answered_result(call, CallStatus.ERROR, response, worker="orchestrator")


def is_cancelled(result: ToolResult) -> bool:
    """Whether the orchestrator answered the call with a cancellation."""
    return result.worker == "orchestrator" and result.response.get("error_type") == "Cancelled"


def failed(call: ToolCall, error_type: str, message: str) -> ToolResult:
    """An error result made by the orchestrator (the call never ran, or timed out)."""
    return error_result(call, error_type, message, worker="orchestrator")
