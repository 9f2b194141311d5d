"""A local OTLP/HTTP receiver: what worker processes export when OTEL_* points at it.

It decodes each `POST /v1/traces` (protobuf ExportTraceServiceRequest) into plain
ReceivedSpan values the tests read; a condition on them is awaited, not polled for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex, as tracing.traceparent writes it
    span_id: str
    parent_span_id: str
    kind: int  # SpanKind of the protobuf: 5 is CONSUMER
    service: str
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return getattr(value, which) if which else None


class OtlpSink:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.bodies: list[bytes] = []  # raw requests, for the secret canary
        self._changed = threading.Condition()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                sink._receive(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def _receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            service=str(resource.get("service.name", "")),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._changed:
            self.bodies.append(body)
            self.spans.extend(received)
            self._changed.notify_all()

    def wait_for(
        self, condition: Callable[[list[ReceivedSpan]], bool], timeout_s: float
    ) -> list[ReceivedSpan]:
        with self._changed:
            if not self._changed.wait_for(lambda: condition(self.spans), timeout_s):
                names = sorted({s.name for s in self.spans})
                raise AssertionError(f"the spans received ({names}) never met the condition")
            return list(self.spans)

    def env(self) -> dict[str, str]:
        """What a worker needs to export here, at once (50 ms batches)."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }


@contextmanager
def otlp_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink()
    thread = threading.Thread(target=sink._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        sink._server.shutdown()
        sink._server.server_close()
