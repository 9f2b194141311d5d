"""What the orchestrator records of each tool call it sends: a span from dispatch to result
(tracing on), the calls in flight per pool, and the dispatch-to-result latency."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.shared import tracing
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.shared.metrics import guarded, metrics

if TYPE_CHECKING:
    from opentelemetry.trace import Span


@dataclass
class CallWatch:
    """One sent call, watched until `end` (called once)."""

    tool: str
    pool: str
    sent_at: float  # time.perf_counter()
    span: Span | None

    @classmethod
    def start(cls, planned: PlannedCall, pool: str, shown_args: dict[str, Any]) -> CallWatch:
        """Watch a call about to be sent (`shown_args`: its arguments, secret-named values
        masked): its span started, counted in flight."""
        with guarded():
            recorded = metrics()
            recorded.labelled(recorded.calls_in_flight, pool).inc()
        span = _call_span(planned, pool, shown_args) if tracing.enabled() else None
        return cls(planned.call.tool, pool, time.perf_counter(), span)

    @property
    def traceparent(self) -> str | None:
        """The call span's W3C traceparent, for the message headers (None: tracing off)."""
        return tracing.traceparent(self.span)

    def end(self, result: ToolResult) -> None:
        """The call is answered (by its worker, or here: a timeout)."""
        status = result.status.value
        seconds = time.perf_counter() - self.sent_at
        with guarded():
            recorded = metrics()
            recorded.labelled(recorded.calls_in_flight, self.pool).dec()
            took = recorded.labelled(recorded.tool_call_seconds, self.tool, self.pool, status)
            took.observe(seconds)
        if self.span is None:
            return
        error = None
        if result.status is CallStatus.ERROR:  # the type only: a tool's message may quote secrets
            error = str(result.response.get("error_type", "Error"))
        tracing.finish(
            self.span,
            error=error,
            toolfleet__status=status,
            toolfleet__worker=result.worker,
            toolfleet__attempt=result.attempt,
        )

    def abandon(self, why: str) -> None:
        """Nobody waits for the call any more (the turn was stopped, the send failed)."""
        with guarded():
            recorded = metrics()
            recorded.labelled(recorded.calls_in_flight, self.pool).dec()
        tracing.finish(self.span, error=why)


def _call_span(planned: PlannedCall, pool: str, shown_args: dict[str, Any]) -> Span | None:
    """`execute_tool {tool}` for one call (GenAI conventions), a child of its invocation's
    span; the worker's span of the run is its child, through the message's traceparent."""
    call = planned.call
    return tracing.start(
        f"execute_tool {call.tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": tracing.attribute_json(shown_args),
            "toolfleet.pool": pool,
            "messaging.system": "celery",
        },
        parent=planned.parent,
        kind="producer",
    )
