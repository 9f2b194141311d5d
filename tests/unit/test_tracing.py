"""Tracing in one process: off by default and inert, spans of a turn when on, secrets
masked, and an exporter that fails or hangs never holds up a call."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Sequence

import pytest
from google.genai import types
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import InProcessRunner, in_memory_spans
from tests.unit.test_dispatch import make_call
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.loop.spans import invocation_span
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared import tracing
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import Keys

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    with in_memory_spans() as exporter:
        yield exporter


async def run_turn(store: SessionStore) -> str:
    """One invocation of two parallel calls and an answer; the answer's text."""
    model = ScriptedModel(
        [call(Call("add", {"a": 1, "b": 2}), Call("add", {"a": 3, "b": 4})), say("7")]
    )
    agent = Agent(name="adder", tools=[add], model=model)
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        agent, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    inv.span = invocation_span(inv)
    content = types.Content(role="user", parts=[types.Part(text="add")])
    updates = [u async for u in run_invocation(inv, content)]
    tracing.finish(inv.span)
    return [u for u in updates if getattr(u, "author", "") == "adder"][-1].content.parts[0].text


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "none"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, "none"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, "none"),
    ],
)
def test_the_standard_variables_choose_the_exporter(environ: dict[str, str], expected: str) -> None:
    assert tracing.exporter_name(environ) == expected


def test_off_by_default_and_an_unknown_exporter_names_the_setting() -> None:
    assert tracing.configure_from_env("svc", {}) is False
    assert not tracing.enabled()
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        tracing.configure_from_env("svc", {"OTEL_TRACES_EXPORTER": "zipkin"})
    assert not tracing.enabled()


def test_otlp_from_the_environment_turns_tracing_on() -> None:
    environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    try:
        assert tracing.configure_from_env("svc", environ) is True
        assert tracing.enabled()
    finally:
        tracing.uninstall()


def test_off_the_message_carries_no_trace_header_and_helpers_make_nothing(
    fake_redis: object,
) -> None:
    publisher = CeleryPublisher(fake_redis)  # type: ignore[arg-type]
    message = json.loads(publisher.encode(publisher.dispatch(make_call({}), "tools.default")))
    assert "traceparent" not in message["headers"]
    assert tracing.start("x", {}) is None
    assert tracing.traceparent(None) is None


def test_the_message_carries_the_call_span_as_w3c_traceparent(fake_redis: object) -> None:
    publisher = CeleryPublisher(fake_redis)  # type: ignore[arg-type]
    dispatch = publisher.dispatch(make_call({}), "tools.default").traced(TRACEPARENT)
    message = json.loads(publisher.encode(dispatch))
    assert message["headers"]["traceparent"] == TRACEPARENT


def test_a_child_of_a_remote_traceparent_shares_its_trace(memory: InMemorySpanExporter) -> None:
    span = tracing.start("child", {"k": "v"}, parent=TRACEPARENT, kind="consumer")
    tracing.finish(span, error="ValueError")
    (done,) = memory.get_finished_spans()
    assert f"{done.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
    assert done.parent is not None and f"{done.parent.span_id:016x}" == TRACEPARENT.split("-")[2]
    assert done.status.status_code.name == "ERROR"
    assert (
        tracing.traceparent(span)
        == f"00-{TRACEPARENT.split('-')[1]}-{done.context.span_id:016x}-01"
    )


def test_secret_named_values_are_masked_and_attributes_bounded() -> None:
    text = tracing.masked_json({"q": "x", "auth": {"api_key": "sk-live"}}, ["api_key"])
    assert "sk-live" not in text and '"api_key": "***"' in text
    assert len(tracing.masked_json({"blob": "x" * 10_000}, [])) == tracing.MAX_ATTRIBUTE_CHARS


async def test_a_turn_has_an_invocation_span_with_its_model_calls(
    store: SessionStore, memory: InMemorySpanExporter
) -> None:
    assert await run_turn(store) == "7"
    spans = memory.get_finished_spans()
    (root,) = [s for s in spans if s.name == "invoke_agent adder"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == root.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"]
    assert root.attributes["gen_ai.agent.name"] == "adder"
    assert root.attributes["gen_ai.conversation.id"] == "s1"


class FailingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector down")


class HangingExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(60)
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize("exporter_type", [FailingExporter, HangingExporter])
async def test_an_exporter_that_fails_or_hangs_never_holds_up_a_turn(
    store: SessionStore, exporter_type: type[SpanExporter]
) -> None:
    exporter = exporter_type()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1))
    tracing.install(provider)
    try:
        # Several turns' spans: the export thread is stuck or failing all along.
        for _ in range(3):
            assert await asyncio.wait_for(run_turn(store), 10) == "7"
    finally:
        tracing.uninstall()
        if isinstance(exporter, HangingExporter):
            assert exporter.entered.wait(10)  # it hangs, turns ran all the same
            exporter.release.set()
        provider.shutdown()


def test_a_worker_block_makes_its_span_current_and_ends_it_failed_on_an_exception(
    memory: InMemorySpanExporter,
) -> None:
    from opentelemetry import trace

    from toolfleet.workers.tool_runs import _in_span

    span = tracing.start("run", {})
    assert span is not None
    with _in_span(span):
        assert trace.get_current_span() is span
    assert not memory.get_finished_spans()  # a block that ends well leaves it open
    with pytest.raises(KeyError), _in_span(span):
        raise KeyError("lost")
    (ended,) = memory.get_finished_spans()
    assert ended.status.status_code.name == "ERROR"
    assert "KeyError" in ended.to_json()
    with _in_span(None):  # tracing off for this call: nothing to make current
        assert trace.get_current_span() is not span
