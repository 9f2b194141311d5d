"""The spans of an invocation and of its model calls (GenAI semantic conventions), and
the model calls' latency metric."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from google.genai import types

from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.models.protocol import Model, ModelRequest
from toolfleet.shared import tracing
from toolfleet.shared.metrics import guarded, metrics

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def invocation_span(inv: Invocation) -> Span | None:
    """The root span of one invocation: `invoke_agent {agent}`."""
    if not tracing.enabled():
        return None
    return tracing.start(
        f"invoke_agent {inv.agent.name}",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": inv.agent.name,
            "gen_ai.conversation.id": inv.session.id,
            "toolfleet.app": inv.session.app_name,
            "toolfleet.invocation.id": inv.id,
            "toolfleet.depth": inv.depth,
        },
    )


def model_span(inv: Invocation, model_name: str) -> Span | None:
    """The span of one model call: `chat {model}`, a child of the invocation's span."""
    if inv.span is None:
        return None
    return tracing.start(
        f"chat {model_name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model_name,
            "gen_ai.agent.name": inv.agent.name,
        },
        parent=tracing.traceparent(inv.span),
        kind="client",
    )


async def generate(inv: Invocation, model: Model, request: ModelRequest) -> types.Content:
    """`model.generate(request)` timed, inside its span (made current: the model adds its
    token usage to it)."""
    span = model_span(inv, model.name)
    started = time.perf_counter()
    status = "error"
    try:
        with tracing.current(span):
            content = await model.generate(request)
        status = "success"
    except BaseException as exc:
        tracing.finish(span, error=type(exc).__name__)
        raise
    finally:
        seconds = time.perf_counter() - started
        with guarded():
            recorded = metrics()
            recorded.labelled(recorded.model_seconds, model.name, status).observe(seconds)
    tracing.finish(span)
    return content
