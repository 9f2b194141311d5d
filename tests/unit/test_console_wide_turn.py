"""`toolfleet run` shows a wide turn's first calls a line each and counts the others."""

from __future__ import annotations

import io

from google.genai import types

from toolfleet.orchestrator.cli.console import SHOWN_CALLS, ConsolePrinter
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult

WIDE = 1000


def result(i: int) -> ToolResult:
    status = CallStatus.ERROR if i % 100 == 99 else CallStatus.SUCCESS
    return ToolResult(
        call_id=f"c{i}", tool="fetch", session_id="s", invocation_id="i", status=status,
        response={"n": i}, worker="w", pid=7, started_at=0.0, finished_at=1.0,
    )  # fmt: skip


def test_a_turn_of_a_thousand_calls_prints_a_bounded_number_of_lines() -> None:
    out = io.StringIO()
    printer = ConsolePrinter(out)
    made = [
        types.Part(function_call=types.FunctionCall(id=f"c{i}", name="fetch", args={"n": i}))
        for i in range(WIDE)
    ]
    model_turn = types.Content(role="model", parts=made)
    printer.show(Event(invocation_id="i", author="a", content=model_turn))
    calls = [
        ToolCall(call_id=f"c{i}", tool="fetch", args={"n": i}, session_id="s", app_name="a",
                 user_id="u", invocation_id="i", agent="a", reply_to="r", dispatched_at=0.0)
        for i in range(WIDE)
    ]  # fmt: skip
    printer.show(CallsDispatched("i", calls))
    results = [result(i) for i in range(WIDE)]
    for each in results:
        printer.show(CallFinished("i", each))
    answered = [
        types.Part(
            function_response=types.FunctionResponse(
                id=r.call_id, name="fetch", response=r.response
            )
        )
        for r in results
    ]
    printer.show(
        Event(
            invocation_id="i", author="a", content=types.Content(role="user", parts=answered),
            calls=[CallRecord.of(r) for r in results],
        )
    )  # fmt: skip

    lines = out.getvalue().splitlines()
    assert len(lines) < 3 * SHOWN_CALLS
    assert sum(line.startswith("[a] calls fetch(") for line in lines) == SHOWN_CALLS
    assert f"[a] … and {WIDE - SHOWN_CALLS} more calls" in lines
    assert sum("fetch" in line and " ms " in line for line in lines) == SHOWN_CALLS
    # Every result is accounted for: the hidden ones by status, the errors among them too.
    assert f"    … and {WIDE - SHOWN_CALLS} more results (10 ERROR, 970 ok)" in lines
    assert printer.turns[-1].calls == WIDE
