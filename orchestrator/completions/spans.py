"""The span of applying a long-running call's completion, linked to the call's own span."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfleet.shared import tracing
from toolfleet.shared.messages import Completion, PendingCall

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def completion_span(pending: PendingCall, completion: Completion) -> Span | None:
    """`apply_completion {tool}`: a trace of its own (it may come days after the call's),
    linked to the span of the call's run, whose traceparent the pending record keeps."""
    if not tracing.enabled():
        return None
    links = [pending.traceparent] if pending.traceparent else []
    return tracing.start(
        f"apply_completion {pending.tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": pending.tool,
            "gen_ai.tool.call.id": pending.call_id,
            "gen_ai.conversation.id": pending.session_id,
            "gen_ai.agent.name": pending.agent,
            "toolfleet.completion.final": completion.final,
            "toolfleet.completion.source": completion.source,
            "toolfleet.pending_s": max(0.0, completion.posted_at - pending.created_at),
        },
        links=links,
        kind="consumer",
    )
