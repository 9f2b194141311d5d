"""OpenTelemetry traces of invocations, model calls and tool calls; off unless configured.

Off (the default), every helper returns at once and OpenTelemetry is not even imported:
tracing that is not asked for costs one global read per call site. On, spans go to a
BatchSpanProcessor, whose queue is bounded and whose exports run on a thread of their own:
an exporter that fails or hangs drops spans, never delays or fails a tool call.

Context crosses processes as W3C `traceparent` strings (the Celery message headers, the
pending-call record), so helpers take and give those rather than OpenTelemetry objects.
Attribute names follow the GenAI semantic conventions (`gen_ai.*`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from toolfleet.shared.errors import ConfigError
from toolfleet.shared.redaction import redact_deep

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger(__name__)

INSTRUMENTATION = "toolfleet"
# The header (Celery message) and field (pending record) the parent's context travels in.
TRACEPARENT = "traceparent"
# An attribute value is cut here: span size stays bounded whatever a tool is sent.
MAX_ATTRIBUTE_CHARS = 2048

_tracer: Tracer | None = None  # None: tracing is off
_provider: TracerProvider | None = None


def enabled() -> bool:
    """Whether spans are recorded in this process."""
    return _tracer is not None


def install(provider: TracerProvider) -> None:
    """Record spans with `provider` (its processors decide where they go)."""
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer(INSTRUMENTATION)


def uninstall() -> None:
    """Turn tracing off in this process (spans already ended are still exported)."""
    global _tracer, _provider
    _tracer, _provider = None, None


@contextmanager
def installed(provider: TracerProvider) -> Iterator[None]:
    """Record spans with `provider` while the block runs, then turn tracing off."""
    install(provider)
    try:
        yield
    finally:
        uninstall()


def flush(timeout_s: float = 5.0) -> None:
    """Export what is queued, waiting at most `timeout_s`; tracing stays on."""
    if _provider is not None:
        _provider.force_flush(int(timeout_s * 1000))


def shutdown(timeout_s: float = 5.0) -> None:
    """Export what is queued (waiting at most `timeout_s`), then turn tracing off."""
    provider = _provider
    uninstall()
    if provider is not None:
        provider.force_flush(int(timeout_s * 1000))
        provider.shutdown()


def exporter_name(environ: Mapping[str, str] = os.environ) -> str:
    """The traces exporter the standard variables ask for: `OTEL_TRACES_EXPORTER`, else
    `otlp` when an OTLP endpoint is set, else `none` (off). `OTEL_SDK_DISABLED=true`: none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none"
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named:
        return named.split(",")[0].strip()
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" if any(environ.get(name) for name in endpoints) else "none"


def configure_from_env(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on as the standard `OTEL_*` variables say; whether it is on.

    Exporters: `otlp` (HTTP/protobuf; gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc and its
    package installed), `console`, `none`. Endpoint, headers, sampler, batch sizes and
    resource attributes are read by the SDK from their own OTEL_* variables; `service`
    is the service.name unless OTEL_SERVICE_NAME says otherwise. ConfigError when tracing
    is asked for but the SDK is not installed (`pip install 'toolfleet[otel]'`)."""
    name = exporter_name(environ)
    if name == "none":
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            f"OpenTelemetry tracing is configured (exporter {name!r}) but opentelemetry-sdk "
            "is not installed: pip install 'toolfleet[otel]', or unset OTEL_TRACES_EXPORTER"
        ) from exc
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or service})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
    install(provider)
    log.info("OpenTelemetry tracing on: exporter %s, service %s", name, service)
    return True


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={name!r} is not supported here; use otlp, console or none"
        )
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
    except ImportError as exc:
        raise ConfigError(
            f"the OTLP exporter for protocol {protocol!r} is not installed: "
            "pip install 'toolfleet[otel]' (gRPC: opentelemetry-exporter-otlp-proto-grpc)"
        ) from exc
    return OTLPSpanExporter()


def start(
    name: str,
    attributes: Mapping[str, Any],
    *,
    parent: str | None = None,
    kind: str = "internal",
    links: Sequence[str] = (),
) -> Span | None:
    """Start a span (None when tracing is off); `parent` and `links` are traceparents.

    Without `parent` it is a child of the current span, if any (an agent tool's run
    inside its worker's span), else the root of a trace. `kind`: a SpanKind name."""
    tracer = _tracer
    if tracer is None:
        return None
    from opentelemetry.trace import Link, SpanKind

    linked = [Link(c) for c in (_span_context(t) for t in links) if c is not None]
    return tracer.start_span(
        name,
        context=_context_of(parent) if parent else None,
        kind=SpanKind[kind.upper()],
        attributes=_clean(attributes),
        links=linked,
    )


def finish(span: Span | None, *, error: str | None = None, **attributes: Any) -> None:
    """End `span` (nothing when None) with more attributes; `error` marks it failed."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if attributes:
        span.set_attributes(_clean({k.replace("__", "."): v for k, v in attributes.items()}))
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error[:MAX_ATTRIBUTE_CHARS]))
        span.set_attribute("error.type", error.split(":")[0][:128])
    span.end()


def current(span: Span | None) -> AbstractContextManager[None]:
    """Make `span` the current one inside the block (for `annotate` by code called there);
    with no span (tracing off), a context that does nothing, built once."""
    if span is None:
        return _NO_SPAN
    return _using(span)


_NO_SPAN: AbstractContextManager[None] = nullcontext()


@contextmanager
def _using(span: Span) -> Iterator[None]:
    from opentelemetry import trace

    with trace.use_span(span, end_on_exit=False, record_exception=False):
        yield


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add attributes to the current span, if any (token usage, from inside a model)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(_clean(attributes))


def traceparent(span: Span | None) -> str | None:
    """The W3C traceparent of `span`, for a child in another process; None when off."""
    if span is None:
        return None
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def masked_json(value: Any, secret_names: Iterable[str]) -> str:
    """`value` as JSON for an attribute: secret-named values masked, cut to a bounded size."""
    return attribute_json(redact_deep(value, secret_names))


def attribute_json(value: Any) -> str:
    """`value` (masked already) as JSON for an attribute, cut to a bounded size."""
    return json.dumps(value, default=str, sort_keys=True)[:MAX_ATTRIBUTE_CHARS]


def _span_context(parent: str | None) -> Any:
    if not parent:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({TRACEPARENT: parent})
    span_context = trace.get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None


def _context_of(parent: str) -> Any:
    from opentelemetry import trace

    span_context = _span_context(parent)
    if span_context is None:  # malformed: a trace of its own rather than no span
        return trace.set_span_in_context(trace.INVALID_SPAN)
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: None dropped, long strings cut."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str):
            value = value[:MAX_ATTRIBUTE_CHARS]
        elif not isinstance(value, bool | int | float):
            value = str(value)[:MAX_ATTRIBUTE_CHARS]
        out[key] = value
    return out
