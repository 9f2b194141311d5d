"""The worker's span of a tool call's run, a child of the orchestrator's call span."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolfleet.shared import tracing
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def run_span(
    tool: str, call: ToolCall, request: Any, pool: str, secret_names: Sequence[str]
) -> Span | None:
    """`execute_tool {tool}` on this worker (None while tracing is off); its parent is the
    traceparent header of the Celery message (`request`: the task's request)."""
    if not tracing.enabled():
        return None
    return tracing.start(
        f"execute_tool {tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": tracing.masked_json(call.args, secret_names),
            "gen_ai.agent.name": call.agent,
            "toolfleet.pool": pool,
            "toolfleet.attempt": request.retries + 1,
            "toolfleet.worker": request.hostname or "unknown",
            "process.pid": os.getpid(),
            "messaging.system": "celery",
            "messaging.message.id": request.id,
        },
        parent=getattr(request, tracing.TRACEPARENT, None),
        kind="consumer",
    )


def end_run_span(span: Span | None, result: ToolResult | None) -> None:
    """End the run's span: its status, or `not_run` when the call was closed already."""
    if span is None:
        return
    if result is None:
        tracing.finish(span, toolfleet__status="not_run")
        return
    error = None
    if result.status is CallStatus.ERROR:  # the type only: a tool's message may quote secrets
        error = str(result.response.get("error_type", "Error"))
    tracing.finish(span, error=error, toolfleet__status=result.status.value)
