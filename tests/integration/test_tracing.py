"""Traces across the fleet: the worker processes' spans join the orchestrator's trace.

The orchestrator's spans go to an in-memory exporter in this process; the workers export
theirs over OTLP/HTTP, configured by the standard OTEL_* variables only, to a receiver
in this process. A secret argument never appears in either.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import redis
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.integration import traced_tools
from tests.integration.otlp_sink import OtlpSink, ReceivedSpan, otlp_sink
from tests.support import in_memory_spans
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.tools import FunctionTool

pytestmark = pytest.mark.integration

WAIT_S = 30
CANARY = f"sk-canary-{uuid.uuid4().hex}"
CONSUMER = 5  # SpanKind CONSUMER in OTLP's protobuf


@pytest.fixture(scope="module")
def sink() -> Iterator[OtlpSink]:
    with otlp_sink() as running:
        yield running


@pytest.fixture(scope="module")
def traced_settings(settings: Settings) -> Settings:
    modules = [*settings.tool_modules, "tests.integration.traced_tools"]
    io_pools = [*settings.io_pools, "traced_io"]
    return settings.model_copy(update={"tool_modules": modules, "io_pools": io_pools})


@pytest.fixture(scope="module")
def traced_fleet(traced_settings: Settings, sink: OtlpSink) -> Iterator[WorkerGroup]:
    """Three worker processes on the `traced` pool (prefork children of two workers), and
    an io worker on `traced_io`."""
    with WorkerGroup(traced_settings, extra_env=sink.env()) as group:
        group.start_all(
            [
                WorkerSpec(["traced"], 2, "tr1"),
                WorkerSpec(["traced"], 1, "tr2"),
                WorkerSpec(["traced_io"], 10, "trio"),
            ]
        )
        yield group


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    with in_memory_spans() as exporter:
        yield exporter


def spans_named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def hex_id(value: int, width: int) -> str:
    return f"{value:0{width}x}"


async def quote_turn(settings: Settings, agent_name: str, tool: FunctionTool, n: int) -> None:
    """One turn of agent `agent_name`: `n` calls of `tool` at once (each with the secret
    canary as its API key), then the answer "ok"."""
    calls = [Call(tool.name, {"item": f"item-{i}", "api_key": CANARY}) for i in range(n)]
    agent = Agent(name=agent_name, tools=[tool], model=ScriptedModel([call(*calls), say("ok")]))
    async with Runner(agent, settings) as runner:
        answer = await runner.ask(user_id="u", session_id=uuid.uuid4().hex, message="quote")
    assert answer == "ok"


def worker_runs(sink: OtlpSink, by_call: Mapping[Any, ReadableSpan]) -> list[ReceivedSpan]:
    """The workers' run spans of the calls in `by_call` (by call id), once one has come
    for each."""

    def ours(received: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [s for s in received if s.attributes.get("gen_ai.tool.call.id") in by_call]

    return ours(sink.wait_for(lambda received: len(ours(received)) == len(by_call), WAIT_S))


async def test_worker_spans_join_the_orchestrator_trace_with_genai_attributes(
    traced_settings: Settings,
    traced_fleet: WorkerGroup,
    sink: OtlpSink,
    memory: InMemorySpanExporter,
    orchestrator_env: dict[str, str],
) -> None:
    await quote_turn(traced_settings, "quotes_agent", traced_tools.fetch_quote, 3)

    spans = memory.get_finished_spans()
    (root,) = spans_named(spans, "invoke_agent quotes_agent")
    trace_id = hex_id(root.context.trace_id, 32)
    chats = spans_named(spans, "chat ")
    assert len(chats) == 2
    assert all(c.attributes["gen_ai.operation.name"] == "chat" for c in chats)
    assert all(c.parent is not None and c.parent.span_id == root.context.span_id for c in chats)
    dispatched = spans_named(spans, "execute_tool fetch_quote")
    assert len(dispatched) == 3
    assert {s.kind for s in dispatched} == {SpanKind.PRODUCER}
    by_call = {s.attributes["gen_ai.tool.call.id"]: s for s in dispatched}

    runs = worker_runs(sink, by_call)
    for run in runs:
        parent = by_call[run.attributes["gen_ai.tool.call.id"]]
        assert run.trace_id == trace_id  # the orchestrator's trace, across the process gap
        assert run.parent_span_id == hex_id(parent.context.span_id, 16)
        assert run.kind == CONSUMER
        assert run.service == "toolfleet-worker"
        assert run.name == "execute_tool fetch_quote"
        assert run.attributes["gen_ai.operation.name"] == "execute_tool"
        assert run.attributes["gen_ai.tool.name"] == "fetch_quote"
        assert run.attributes["toolfleet.status"] == "success"
        assert '"api_key": "***"' in run.attributes["gen_ai.tool.call.arguments"]
    assert len({(r.attributes["toolfleet.worker"], r.attributes["process.pid"]) for r in runs}) >= 2

    # The secret reached the tool (its length came back) and no span, on either side.
    assert all(s.attributes["toolfleet.status"] == "success" for s in dispatched)
    for span in spans:
        assert CANARY not in repr(dict(span.attributes or {})), span.name
    assert all(CANARY.encode() not in body for body in sink.bodies)


async def test_the_io_intakes_spans_join_the_orchestrator_trace_too(
    traced_settings: Settings,
    traced_fleet: WorkerGroup,
    sink: OtlpSink,
    memory: InMemorySpanExporter,
) -> None:
    await quote_turn(traced_settings, "io_quotes_agent", traced_tools.fetch_quote_async, 2)

    spans = memory.get_finished_spans()
    (root,) = spans_named(spans, "invoke_agent io_quotes_agent")
    by_call = {
        s.attributes["gen_ai.tool.call.id"]: s
        for s in spans_named(spans, "execute_tool fetch_quote_async")
    }
    assert len(by_call) == 2

    (io_worker,) = [w.hostname for w in traced_fleet.workers if "traced_io" in w.pools]
    for run in worker_runs(sink, by_call):
        parent = by_call[run.attributes["gen_ai.tool.call.id"]]
        assert run.trace_id == hex_id(root.context.trace_id, 32)
        assert run.parent_span_id == hex_id(parent.context.span_id, 16)
        assert run.attributes["toolfleet.worker"] == io_worker
        assert run.attributes["toolfleet.attempt"] == 1
        assert run.attributes["toolfleet.status"] == "success"
        assert CANARY not in str(run.attributes)


async def test_a_completion_applied_later_links_to_the_call_span(
    traced_settings: Settings,
    traced_fleet: WorkerGroup,
    sink: OtlpSink,
    memory: InMemorySpanExporter,
    orchestrator_env: dict[str, str],
) -> None:
    model = ScriptedModel(
        [call(Call("open_order", {"item": "desk"})), say("opened"), say("the order is in")]
    )
    agent = Agent(name="orders_traced", tools=[traced_tools.open_order], model=model)
    async with Orchestrator([agent], traced_settings) as orch:
        session_id = uuid.uuid4().hex
        await orch.runner("orders_traced").ask(user_id="u", session_id=session_id, message="go")
        key = session_key("orders_traced", "u", session_id)
        (pending,) = await orch.runner("orders_traced").store.pending_calls(key)
        assert pending.traceparent is not None
        client = redis.Redis.from_url(traced_settings.require_redis_url())
        completions = Completions(client, Keys(traced_settings.key_prefix))
        completions.post_result(pending.call_id, {"status": "delivered"})
        assert await orch.wait_until_settled(key, WAIT_S)
        client.close()

    (applied,) = spans_named(memory.get_finished_spans(), "apply_completion open_order")
    assert applied.attributes["gen_ai.tool.call.id"] == pending.call_id
    assert applied.attributes["toolfleet.outcome"] == "applied"
    (link,) = applied.links
    received = sink.wait_for(
        lambda got: any(s.attributes.get("gen_ai.tool.call.id") == pending.call_id for s in got),
        WAIT_S,
    )
    (run,) = [s for s in received if s.attributes.get("gen_ai.tool.call.id") == pending.call_id]
    # The link points at the worker's span of the call's run, in the call's own trace.
    assert hex_id(link.context.span_id, 16) == run.span_id
    assert hex_id(link.context.trace_id, 32) == run.trace_id
    assert applied.context.trace_id != link.context.trace_id
