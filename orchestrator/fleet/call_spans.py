"""The orchestrator's span of each tool call: from its dispatch to its result (or deadline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.shared import tracing
from toolfleet.shared.messages import CallStatus, ToolResult

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def call_span(planned: PlannedCall, pool: str, secret_names: list[str]) -> Span | None:
    """`execute_tool {tool}` for one call (GenAI conventions), a child of its invocation's
    span; the worker's span of the run is its child, through the message's traceparent."""
    if not tracing.enabled():
        return None
    call = planned.call
    return tracing.start(
        f"execute_tool {call.tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": tracing.masked_json(call.args, secret_names),
            "toolfleet.pool": pool,
            "messaging.system": "celery",
        },
        parent=planned.parent,
        kind="producer",
    )


def end_call_span(span: Span | None, result: ToolResult) -> None:
    """End a call's span with its outcome: status, where it ran, and an error's type."""
    if span is None:
        return
    error = None
    if result.status is CallStatus.ERROR:  # the type only: a tool's message may quote secrets
        error = str(result.response.get("error_type", "Error"))
    tracing.finish(
        span,
        error=error,
        toolfleet__status=result.status.value,
        toolfleet__worker=result.worker,
        toolfleet__attempt=result.attempt,
    )
