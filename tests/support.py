"""Test doubles shared by unit tests: an in-process tool runner, in-process tools."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared import tracing
from toolfleet.shared.completions import Completions
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, PendingCall, ToolCall, ToolResult
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.executor import execute


@dataclass(frozen=True, eq=False)
class LocalTool(FunctionTool):
    """A tool run only in this process (the executor's unit tests): its function may be
    nested in a test, which a worker could not import, so that check is off."""

    checks_importable: ClassVar[bool] = False


class InProcessRunner:
    """Runs planned calls in this process (threads), concurrently, yielding as they finish."""

    def __init__(
        self,
        *,
        reverse: bool = False,
        services: ToolServices | None = None,
        tickets: Completions | None = None,
    ) -> None:
        self.services = services  # what the tools get (artifacts, memory), as on a worker
        # Where long-running calls' tickets go, as a worker writes them (None: nowhere).
        self.tickets = tickets
        self.batches: list[list[str]] = []  # call ids of each run(), to check what was dispatched
        self.settled: list[str] = []
        self.stopped: list[str] = []  # call ids the loop asked to stop (cancelled)
        self.reverse = reverse  # yield results in reverse call order (arrival != call order)

    async def run(
        self,
        calls: Sequence[PlannedCall],
        *,
        resume: bool = False,
        fence: object = None,
        with_first_send: object = None,  # nothing goes through Redis: the loop writes alone
        more: AsyncIterator[Sequence[PlannedCall]] | None = None,
    ) -> AsyncIterator[ToolResult]:
        # In process nothing outlives a crash: a resumed turn runs all its calls.
        if more is not None:  # the turn's other calls, all asked for before any runs
            calls = [*calls, *[p async for chunk in more for p in chunk]]
        self.batches.append([p.call.call_id for p in calls])
        tasks = [asyncio.create_task(asyncio.to_thread(self._execute, p)) for p in calls]
        if self.reverse:
            for task in reversed(tasks):
                yield await task
            return
        for next_done in asyncio.as_completed(tasks):
            yield await next_done

    def _execute(self, planned: PlannedCall) -> ToolResult:
        """The call run here, its ticket opened and written as its worker would."""
        tickets = self.tickets if planned.tool.is_long_running else None
        if tickets is not None:
            tickets.register(PendingCall.starting(planned.call))
        result = execute(
            planned.tool,
            planned.call,
            worker="in-process",
            max_result_bytes=64_000,
            services=self.services,
        ).result
        if tickets is not None and result.status is CallStatus.PENDING:
            tickets.register(PendingCall.starting(planned.call, result.response))
        elif tickets is not None:
            tickets.withdraw(planned.call.session_key, planned.call.call_id)
        return result

    async def settle(self, session_id: str) -> None:
        self.settled.append(session_id)

    def stage_settle(self, session_id: str, batch: object) -> None:
        self.settled.append(session_id)

    def cancel(self, session_id: str) -> None:
        """In process, calls run to their end: a cancellation stops only the loop."""

    async def stop(self, session_id: str, call_ids: Sequence[str]) -> None:
        self.stopped.extend(call_ids)


async def until(predicate: Callable[[], object], what: str, timeout_s: float) -> None:
    """Wait for a condition off the event loop (the orchestrator keeps running)."""
    await asyncio.to_thread(wait_for, predicate, timeout_s, what, interval_s=0.05)


def answers(session: Session) -> list[tuple[str, dict[str, Any]]]:
    """(call id, response) of every function response the session holds, in order."""
    return [
        (r.id or "", r.response or {})
        for event in session.events
        for r in event.get_function_responses()
    ]


def assert_one_response_per_call(session: Session) -> None:
    """Every function call of the session has exactly one response (the invariant)."""
    calls = [c.id for event in session.events for c in event.get_function_calls()]
    responded = Counter(call_id for call_id, _ in answers(session))
    assert responded == Counter(calls) and set(responded.values()) == {1}, (calls, responded)


@contextlib.contextmanager
def in_memory_spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process while the block runs, every span kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.installed(provider):
        yield exporter


def span_text(exporter: InMemorySpanExporter) -> str:
    """Everything the finished spans say (names, attributes, events, status), as text."""
    return "\n".join(span.to_json() for span in exporter.get_finished_spans())


def tool_call(
    call_id: str, tool: str, session_id: str, reply_to: str, args: dict[str, Any] | None = None
) -> ToolCall:
    """A call envelope as the orchestrator sends it, for tests that send one themselves."""
    return ToolCall(
        call_id=call_id,
        tool=tool,
        args=args or {},
        session_id=session_id,
        app_name="app",
        user_id="u",
        invocation_id=f"inv-{session_id}",
        agent="agent",
        reply_to=reply_to,
        dispatched_at=time.time(),
    )


def first_deliveries(client: Any, keys: Keys, call_id: str) -> int:
    """How many times the broker delivered the first attempt of `call_id`, over every
    send of it (`Keys.deliveries`: a send's counter is named by when it was sent)."""
    pattern = f"{keys.prefix}:deliveries:{call_id}:*:0"
    return sum(int(client.get(key) or 0) for key in client.scan_iter(pattern))


def counted_round_trips(client: Any) -> list[int]:
    """A list that grows by one for each write `client` sends on a connection of its pool
    (a command, a pipeline, or a batch sent whole): its round trips."""
    sent: list[int] = []
    pool = client.connection_pool
    get_connection = pool.get_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        connection = get_connection(*args, **kwargs)
        if not getattr(connection, "_counted", False):
            send = connection.send_packed_command

            def counted(*a: Any, **k: Any) -> Any:
                sent.append(1)
                return send(*a, **k)

            connection.send_packed_command = counted
            connection._counted = True
        return connection

    pool.get_connection = counting
    return sent
